// util/dtype.h — element types of weights and caches, and scalar conversions.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nextn {

// Float types first; then the block-quantized weight types of GGUF files (ggml's
// layouts, see kernels/weight_format.h); then MLX's affine 4- and 8-bit groups of
// 32/64/128, repacked at load into blocks of {f32 scale, f32 bias, values}
// (kernels/format_mlx.cc); last, interleaved layouts that the weight store regroups
// file matrices into at load (Q8_0x16: 16 rows of Q8_0 per group, kernels/format_interleaved16.cc;
// Q4_Kx16 also unpacks the 6-bit sub-block scales to bytes, so its rows are larger).
// A quantized row of n elements is n/block blocks of block_bytes each (an interleaved
// group of g rows holds g rows' bytes); dtype_size() is only meaningful for the float types.
enum class DType {
  kF32, kF16, kBF16,
  kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ4_K, kQ5_K, kQ6_K,
  kMlx4G32, kMlx4G64, kMlx4G128, kMlx8G32, kMlx8G64, kMlx8G128,
  kQ8_0x16, kQ4_0x16, kQ4_Kx16, kQ6_Kx16,
};

inline bool is_quantized(DType dtype) { return dtype > DType::kBF16; }
inline size_t dtype_size(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

struct DTypeInfo {
  const char* name;     // "Q4_K"
  int block_elems;      // elements per block (1 for float types)
  int block_bytes;      // bytes per block
  int ggml_type;        // the type id in GGUF tensor infos (-1: none, an in-memory layout)
};
inline const DTypeInfo& dtype_info(DType dtype) {
  static const DTypeInfo table[] = {
      {"F32", 1, 4, 0},      {"F16", 1, 2, 1},      {"BF16", 1, 2, 30},    {"Q8_0", 32, 34, 8},
      {"Q4_0", 32, 18, 2},   {"Q4_1", 32, 20, 3},   {"Q5_0", 32, 22, 6},   {"Q5_1", 32, 24, 7},
      {"Q4_K", 256, 144, 12}, {"Q5_K", 256, 176, 13}, {"Q6_K", 256, 210, 14},
      {"MLX4_G32", 32, 24, -1}, {"MLX4_G64", 64, 40, -1}, {"MLX4_G128", 128, 72, -1},
      {"MLX8_G32", 32, 40, -1}, {"MLX8_G64", 64, 72, -1}, {"MLX8_G128", 128, 136, -1},
      {"Q8_0x16", 32, 34, -1}, {"Q4_0x16", 32, 18, -1}, {"Q4_Kx16", 256, 148, -1}, {"Q6_Kx16", 256, 210, -1}};
  return table[static_cast<int>(dtype)];
}
inline const char* dtype_name(DType dtype) { return dtype_info(dtype).name; }
// The in-memory dtype of MLX affine weights with `bits` per value in groups of `group`;
// false when nextn has none (bits other than 4 and 8, groups other than 32/64/128).
inline bool dtype_from_mlx(int bits, int group, DType& out) {
  const int g = group == 32 ? 0 : group == 64 ? 1 : group == 128 ? 2 : -1;
  if (g < 0 || (bits != 4 && bits != 8)) return false;
  out = static_cast<DType>(static_cast<int>(bits == 4 ? DType::kMlx4G32 : DType::kMlx8G32) + g);
  return true;
}
// The dtype whose GGUF type id is `ggml_type`; false when nextn has no such type.
inline bool dtype_from_ggml_type(uint32_t ggml_type, DType& out) {
  for (int i = 0; i <= static_cast<int>(DType::kQ6_K); ++i)
    if (static_cast<uint32_t>(dtype_info(static_cast<DType>(i)).ggml_type) == ggml_type) {
      out = static_cast<DType>(i);
      return true;
    }
  return false;
}
// Bytes of a row of n elements (n a multiple of the block size).
inline size_t dtype_row_bytes(DType dtype, int64_t n) {
  const DTypeInfo& info = dtype_info(dtype);
  return static_cast<size_t>(n / info.block_elems) * static_cast<size_t>(info.block_bytes);
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
