// util/dtype.h — element types of weights and caches, and scalar conversions.
#pragma once
#include <cmath>
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
// IEEE half precision in integer code (not _Float16: clang 14 on x86 lacks it), round to
// nearest even (tests/kernels/dtype_test.cc checks it against a nearest-value search).
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    float f = float(mant) * 5.9604644775390625e-08f;
    return sign ? -f : f;
  }
  uint32_t bits = exp == 0x1f ? sign | 0x7f800000 | (mant << 13)  // inf, NaN
                              : sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, a = x & 0x7fffffff;
  if (a > 0x7f800000) return uint16_t(sign | 0x7e00 | ((a >> 13) & 0x3ff));  // NaN stays NaN
  if (a >= 0x477ff000) return uint16_t(sign | 0x7c00);                       // >= 65520 rounds to inf
  if (a >= 0x38800000)  // a normal half: rebias the exponent, round the mantissa at bit 13
    return uint16_t(sign | ((a + 0xfff + ((a >> 13) & 1) - 0x38000000) >> 13));
  float v;  // below 2^-14: a subnormal half (or zero), v * 2^24 rounded to an integer
  std::memcpy(&v, &a, 4);
  return uint16_t(sign | uint32_t(std::nearbyint(v * 16777216.0f)));
}

}  // namespace nextn
