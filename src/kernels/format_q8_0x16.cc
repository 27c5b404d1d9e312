// kernels/format_q8_0x16.cc — Q8_0 matrices regrouped 16 rows at a time
// (kernels/interleaved-inl.h), an in-memory layout the weight store repacks copied Q8_0
// matrices into.
//
// A block of a group is 32 columns of 16 rows in 544 bytes (16 × 34, as in the file): the
// 16 rows' fp16 scales d, then 8 chunks of 64 bytes, chunk c holding columns 4c..4c+3 of
// row 0, of row 1, ..., each as q + 128 (an unsigned byte). One unit per block.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q8_0x16.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/interleaved-inl.h"

#ifndef NEXTN_KERNELS_FORMAT_Q8_0X16_LAYOUT  // this file is compiled once per target
#define NEXTN_KERNELS_FORMAT_Q8_0X16_LAYOUT
namespace nextn {
// The layout's bytes, read one value at a time (the scalar code, rows, repacking).
struct Q8_0x16Bytes {
  static constexpr int kElems = 32, kBlockBytes = 544, kUnits = 1, kUnitElems = 32, kOffset = 128;
  static constexpr bool kHasMin = false;
  static constexpr int kChunks = 32;  // bytes before the first chunk: the scales
  static int at(int i, int o) { return kChunks + 64 * (i / 4) + 4 * o + i % 4; }
  static int value(const uint8_t* block, int, int i, int o) { return block[at(i, o)]; }
  static float scale_at(const uint8_t* block, int, int o) { return load_f16(block + 2 * o); }
  static float min_at(const uint8_t*, int, int) { return 0.0f; }
};
}  // namespace nextn
#endif

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q8_0x16Layout : Q8_0x16Bytes {
#if NEXTN_INTERLEAVED_SIMD
  static VI chunk(const uint8_t* block, int, int c, int lane0) { return load_i(block + kChunks + 64 * c + 4 * lane0); }
  static VF unit_scale(const uint8_t* block, int, int lane0) { return f16s(block + 2 * lane0); }
  static VF unit_min(const uint8_t*, int, int) { return zero_f(); }
#endif
};

void MatmulQ8_0x16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  interleaved_matmul<Q8_0x16Layout>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {
namespace {
using L = Q8_0x16Bytes;

HWY_EXPORT(MatmulQ8_0x16);
void matmul_q8_0x16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ8_0x16)(job, o_begin, o_end);
}

// As format_q8_0.cc's dequantizer: d · q.
void dequantize_row_q8_0x16(const uint8_t* data, int64_t cols, int64_t row, float* out) {
  const uint8_t* group = data + row / 16 * 16 * dtype_row_bytes(DType::kQ8_0x16, cols);
  const int o = static_cast<int>(row % 16);
  for (int64_t b = 0; b < cols / L::kElems; ++b) {
    const uint8_t* block = group + b * L::kBlockBytes;
    for (int i = 0; i < L::kElems; ++i)
      out[L::kElems * b + i] = L::scale_at(block, 0, o) * static_cast<float>(L::value(block, 0, i, o) - L::kOffset);
  }
}

void repack_q8_0x16(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  const size_t row_bytes = dtype_row_bytes(DType::kQ8_0, cols);
  for (int64_t g = 0; g < rows / 16; ++g)
    for (int64_t b = 0; b < cols / L::kElems; ++b) {
      uint8_t* block = dst + g * 16 * dtype_row_bytes(DType::kQ8_0x16, cols) + b * L::kBlockBytes;
      for (int o = 0; o < 16; ++o) {
        const uint8_t* in = src + (g * 16 + o) * row_bytes + b * 34;  // {fp16 d; int8 qs[32]}
        std::memcpy(block + 2 * o, in, 2);
        for (int i = 0; i < L::kElems; ++i) block[L::at(i, o)] = in[2 + i] ^ 0x80;
      }
    }
}
}  // namespace

extern const WeightFormat kQ8_0x16Format = {DType::kQ8_0x16, nullptr, nullptr, matmul_q8_0x16, 16,
                                            dequantize_row_q8_0x16};
extern const Interleaving kQ8_0x16Interleaving = {DType::kQ8_0, DType::kQ8_0x16, repack_q8_0x16};
}  // namespace nextn
#endif  // HWY_ONCE
