// util/dtype.h — element types of weights and caches, and scalar conversions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nextn {

enum class DType { kF32, kF16, kBF16 };

inline size_t dtype_size(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }
inline const char* dtype_name(DType dtype) {
  return dtype == DType::kF32 ? "F32" : dtype == DType::kF16 ? "F16" : "BF16";
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t f32_to_bf16(float f) {  // round to nearest even
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}
inline float f16_to_f32(uint16_t h) {
  _Float16 f;
  std::memcpy(&f, &h, 2);
  return static_cast<float>(f);
}
inline uint16_t f32_to_f16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

}  // namespace nextn
