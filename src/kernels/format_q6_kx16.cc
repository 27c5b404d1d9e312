// kernels/format_q6_kx16.cc — Q6_K matrices regrouped 16 rows at a time
// (kernels/interleaved-inl.h), an in-memory layout the weight store repacks copied Q6_K
// matrices into.
//
// A block of a group is 256 columns of 16 rows in 3360 bytes (16 × 210, as in the file):
// the rows' fp16 d, their int8 sub-block scales sc[16 sub-blocks][16 rows], then per 32
// columns (two units of 16) 384 bytes: 4 vectors of 64 bytes whose byte 4o + k holds the
// low 4 bits of column 4p + k of row o (low nibble) and of column 4(p + 4) + k (high
// nibble), then 2 vectors whose byte 4o + k holds in bits 2s, 2s + 1 the top 2 bits of
// column 4(4h + s) + k. Values q are 0..63; x = d·sc·(q − 32).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q6_kx16.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/interleaved-inl.h"

#ifndef NEXTN_KERNELS_FORMAT_Q6_KX16_LAYOUT  // this file is compiled once per target
#define NEXTN_KERNELS_FORMAT_Q6_KX16_LAYOUT
namespace nextn {
// The layout's bytes, read one value at a time (the scalar code, rows, repacking).
struct Q6_Kx16Bytes {
  static constexpr int kElems = 256, kBlockBytes = 3360, kUnits = 16, kUnitElems = 16, kOffset = 32, kMaxValue = 63, kStep = 2;
  static constexpr bool kHasMin = false;
  static constexpr int kSc = 32, kQ = 288, kPairBytes = 384;  // byte offsets / sizes in a block
  // Chunk cc (0..7) of the 32 columns of units 2P, 2P+1: its nibble byte and its top-bits byte.
  static int low_at(int u, int cc, int o, int k) { return kQ + kPairBytes * (u / 2) + 64 * (cc % 4) + 4 * o + k; }
  static int top_at(int u, int cc, int o, int k) { return kQ + kPairBytes * (u / 2) + 256 + 64 * (cc / 4) + 4 * o + k; }
  static int value(const uint8_t* block, int u, int i, int o) {
    const int cc = 4 * (u % 2) + i / 4, k = i % 4;
    const int low = cc < 4 ? block[low_at(u, cc, o, k)] & 0xF : block[low_at(u, cc, o, k)] >> 4;
    return low | ((block[top_at(u, cc, o, k)] >> (2 * (cc % 4))) & 3) << 4;
  }
  static float scale_at(const uint8_t* block, int u, int o) {
    return static_cast<float>(static_cast<int8_t>(block[kSc + 16 * u + o])) * load_f16(block + 2 * o);
  }
  static float min_at(const uint8_t*, int, int) { return 0.0f; }
  // Row o from the file's block {ql[128]; qh[64]; int8 sc[16]; fp16 d}: the values of
  // elements e = 128·half + 32·j + l read as the file's dequantizer reads them (low 4 bits
  // in ql[64·half + 32(j % 2) + l], high nibble for j ≥ 2; top 2 in qh[32·half + l] >> 2j),
  // then written into row o's bytes, every one of them.
  static void put(uint8_t* block, int o, const uint8_t* in) {
    std::memcpy(block + 2 * o, in + 208, 2);
    for (int u = 0; u < kUnits; ++u) block[kSc + 16 * u + o] = in[192 + u];
    uint8_t low[256], top[256];
    for (int half = 0; half < 2; ++half)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
          const int e = 128 * half + 32 * j + l;
          low[e] = static_cast<uint8_t>((in[64 * half + 32 * (j % 2) + l] >> (4 * (j / 2))) & 0xF);
          top[e] = static_cast<uint8_t>((in[128 + 32 * half + l] >> (2 * j)) & 3);
        }
    for (int pair = 0; pair < kUnits / 2; ++pair) {  // units 2·pair, 2·pair + 1: columns e0 ..
      const uint8_t* lo = low + 32 * pair;
      const uint8_t* hi = top + 32 * pair;
      uint8_t* nibbles = block + low_at(2 * pair, 0, o, 0);
      uint8_t* tops = block + top_at(2 * pair, 0, o, 0);
      for (int p = 0; p < 4; ++p)
        for (int k = 0; k < 4; ++k) nibbles[64 * p + k] = static_cast<uint8_t>(lo[4 * p + k] | lo[16 + 4 * p + k] << 4);
      for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 4; ++k)
          tops[64 * h + k] = static_cast<uint8_t>(hi[16 * h + k] | hi[16 * h + 4 + k] << 2 | hi[16 * h + 8 + k] << 4 |
                                                  hi[16 * h + 12 + k] << 6);
    }
  }
};
}  // namespace nextn
#endif

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q6_Kx16Layout : Q6_Kx16Bytes {
#if NEXTN_INTERLEAVED_SIMD
  static VI chunk(const uint8_t* block, int u, int c, int lane0) {
    const int cc = 4 * (u % 2) + c;
    const VI packed = load_i(block + low_at(u, cc, lane0, 0));
    const VI low = and_i(cc < 4 ? packed : shift_right16(packed, 4), bytes_i(0xF));
    const VI top = and_i(shift_right16(load_i(block + top_at(u, cc, lane0, 0)), 2 * (cc % 4)), bytes_i(3));
    return or_i(low, shift_left16(top, 4));
  }
  static VF unit_scale(const uint8_t* block, int u, int lane0) {
    return mul_f(i8s(block + kSc + 16 * u + lane0), f16s(block + 2 * lane0));
  }
  static VF unit_min(const uint8_t*, int, int) { return zero_f(); }
#endif
};

void MatmulQ6_Kx16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  interleaved_matmul<Q6_Kx16Layout>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {
namespace {
HWY_EXPORT(MatmulQ6_Kx16);
void matmul_q6_kx16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ6_Kx16)(job, o_begin, o_end);
}
}  // namespace

extern const WeightFormat kQ6_Kx16Format = {DType::kQ6_Kx16, nullptr, nullptr, matmul_q6_kx16, 16,
                                            dequantize_interleaved_row<Q6_Kx16Bytes, DType::kQ6_Kx16>};
extern const Interleaving kQ6_Kx16Interleaving = {DType::kQ6_K, DType::kQ6_Kx16,
                                                 repack_interleaved<Q6_Kx16Bytes, DType::kQ6_K, DType::kQ6_Kx16>};
}  // namespace nextn
#endif  // HWY_ONCE
