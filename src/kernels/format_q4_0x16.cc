// kernels/format_q4_0x16.cc — Q4_0 matrices regrouped 16 rows at a time
// (kernels/interleaved-inl.h), an in-memory layout the weight store repacks copied Q4_0
// matrices into.
//
// A block of a group is 32 columns of 16 rows in 288 bytes (16 × 18, as in the file): the
// rows' fp16 d, then 4 vectors of 64 bytes, vector p holding in byte 4o + k column 4p + k of
// row o (low nibble) and column 4(p + 4) + k (high nibble). x = d·(q − 8); one unit per block.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q4_0x16.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/interleaved-inl.h"

#ifndef NEXTN_KERNELS_FORMAT_Q4_0X16_LAYOUT  // this file is compiled once per target
#define NEXTN_KERNELS_FORMAT_Q4_0X16_LAYOUT
namespace nextn {
// The layout's bytes, read one value at a time (the scalar code, rows, repacking).
struct Q4_0x16Bytes {
  static constexpr int kElems = 32, kBlockBytes = 288, kUnits = 1, kUnitElems = 32, kOffset = 8;
  static constexpr bool kHasMin = false;
  static constexpr int kQs = 32;  // bytes before the first vector: the scales
  static int at(int i, int o) { return kQs + 64 * (i / 4 % 4) + 4 * o + i % 4; }
  static bool high(int i) { return i >= 16; }  // chunks 4..7
  static int value(const uint8_t* block, int, int i, int o) {
    const int byte = block[at(i, o)];
    return high(i) ? byte >> 4 : byte & 0xF;
  }
  static float scale_at(const uint8_t* block, int, int o) { return load_f16(block + 2 * o); }
  static float min_at(const uint8_t*, int, int) { return 0.0f; }
};
}  // namespace nextn
#endif

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q4_0x16Layout : Q4_0x16Bytes {
#if NEXTN_INTERLEAVED_SIMD
  static VI chunk(const uint8_t* block, int, int c, int lane0) {
    const VI packed = load_i(block + kQs + 64 * (c % 4) + 4 * lane0);
    return and_i(c < 4 ? packed : shift_right16(packed, 4), bytes_i(0xF));
  }
  static VF unit_scale(const uint8_t* block, int, int lane0) { return f16s(block + 2 * lane0); }
  static VF unit_min(const uint8_t*, int, int) { return zero_f(); }
#endif
};

void MatmulQ4_0x16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  interleaved_matmul<Q4_0x16Layout>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {
namespace {
using L = Q4_0x16Bytes;

HWY_EXPORT(MatmulQ4_0x16);
void matmul_q4_0x16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ4_0x16)(job, o_begin, o_end);
}

// As format_q4_0.cc's dequantizer: d·(q − 8).
void dequantize_row_q4_0x16(const uint8_t* data, int64_t cols, int64_t row, float* out) {
  const uint8_t* group = data + row / 16 * 16 * dtype_row_bytes(DType::kQ4_0x16, cols);
  const int o = static_cast<int>(row % 16);
  for (int64_t b = 0; b < cols / L::kElems; ++b) {
    const uint8_t* block = group + b * L::kBlockBytes;
    for (int i = 0; i < L::kElems; ++i)
      out[L::kElems * b + i] = L::scale_at(block, 0, o) * static_cast<float>(L::value(block, 0, i, o) - L::kOffset);
  }
}

void repack_q4_0x16(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  const size_t row_bytes = dtype_row_bytes(DType::kQ4_0, cols);
  for (int64_t g = 0; g < rows / 16; ++g)
    for (int64_t b = 0; b < cols / L::kElems; ++b) {
      uint8_t* block = dst + g * 16 * dtype_row_bytes(DType::kQ4_0x16, cols) + b * L::kBlockBytes;
      std::memset(block + L::kQs, 0, L::kBlockBytes - L::kQs);
      for (int o = 0; o < 16; ++o) {
        const uint8_t* in = src + (g * 16 + o) * row_bytes + b * 18;  // {fp16 d; qs[16]}: element j low, j + 16 high
        std::memcpy(block + 2 * o, in, 2);
        for (int i = 0; i < L::kElems; ++i) {
          const int q = i < 16 ? in[2 + i] & 0xF : in[2 + i - 16] >> 4;
          block[L::at(i, o)] |= static_cast<uint8_t>(L::high(i) ? q << 4 : q);
        }
      }
    }
}
}  // namespace

extern const WeightFormat kQ4_0x16Format = {DType::kQ4_0x16, nullptr, nullptr, matmul_q4_0x16, 16,
                                            dequantize_row_q4_0x16};
extern const Interleaving kQ4_0x16Interleaving = {DType::kQ4_0, DType::kQ4_0x16, repack_q4_0x16};
}  // namespace nextn
#endif  // HWY_ONCE
