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
  static constexpr int kElems = 32, kBlockBytes = 288, kUnits = 1, kUnitElems = 32, kOffset = 8, kMaxValue = 15, kStep = 1;
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
  // Row o from the file's block {fp16 d; qs[16]}: element j in the low nibble of byte j,
  // element j + 16 in its high nibble, which is the layout's pairing of chunks p and p + 4:
  // chunk p's bytes are the file's bytes 4p...
  static void put(uint8_t* block, int o, const uint8_t* in) {
    std::memcpy(block + 2 * o, in, 2);
    for (int p = 0; p < 4; ++p) std::memcpy(block + at(4 * p, o), in + 2 + 4 * p, 4);
  }
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
HWY_EXPORT(MatmulQ4_0x16);
void matmul_q4_0x16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ4_0x16)(job, o_begin, o_end);
}
}  // namespace

extern const WeightFormat kQ4_0x16Format = {DType::kQ4_0x16, nullptr, nullptr, matmul_q4_0x16, 16,
                                            dequantize_interleaved_row<Q4_0x16Bytes, DType::kQ4_0x16>};
extern const Interleaving kQ4_0x16Interleaving = {DType::kQ4_0, DType::kQ4_0x16,
                                                 repack_interleaved<Q4_0x16Bytes, DType::kQ4_0, DType::kQ4_0x16>};
}  // namespace nextn
#endif  // HWY_ONCE
