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
  static constexpr int kElems = 32, kBlockBytes = 544, kUnits = 1, kUnitElems = 32, kOffset = 128, kMaxValue = 255, kStep = 1;
  static constexpr bool kHasMin = false;
  static constexpr int kChunks = 32;  // bytes before the first chunk: the scales
  static int at(int i, int o) { return kChunks + 64 * (i / 4) + 4 * o + i % 4; }
  static int value(const uint8_t* block, int, int i, int o) { return block[at(i, o)]; }
  static float scale_at(const uint8_t* block, int, int o) { return load_f16(block + 2 * o); }
  static float min_at(const uint8_t*, int, int) { return 0.0f; }
  // Row o from the file's block {fp16 d; int8 qs[32]}: chunk p is its bytes 4p.. + 128.
  static void put(uint8_t* block, int o, const uint8_t* in) {
    std::memcpy(block + 2 * o, in, 2);
    for (int p = 0; p < kElems / 4; ++p) {
      uint32_t word;
      std::memcpy(&word, in + 2 + 4 * p, 4);
      word ^= 0x80808080u;
      std::memcpy(block + at(4 * p, o), &word, 4);
    }
  }
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
HWY_EXPORT(MatmulQ8_0x16);
void matmul_q8_0x16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ8_0x16)(job, o_begin, o_end);
}
}  // namespace

extern const WeightFormat kQ8_0x16Format = {DType::kQ8_0x16, nullptr, nullptr, matmul_q8_0x16, 16,
                                            dequantize_interleaved_row<Q8_0x16Bytes, DType::kQ8_0x16>};
extern const Interleaving kQ8_0x16Interleaving = {DType::kQ8_0, DType::kQ8_0x16,
                                                 repack_interleaved<Q8_0x16Bytes, DType::kQ8_0, DType::kQ8_0x16>};
}  // namespace nextn
#endif  // HWY_ONCE
