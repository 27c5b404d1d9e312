// kernels/format_q4_kx16.cc — Q4_K matrices regrouped 16 rows at a time
// (kernels/interleaved-inl.h), an in-memory layout the weight store repacks copied Q4_K
// matrices into.
//
// A block of a group is 256 columns of 16 rows in 2368 bytes (148 per row; the file's 144
// plus its 6-bit sub-block scales and minimums unpacked to bytes): the rows' fp16 d, their
// fp16 dmin, sc[8 sub-blocks][16 rows], m[8][16], then per sub-block (a unit of 32 columns)
// 4 vectors of 64 bytes, vector p holding in byte 4o + k column 4p + k of row o (low nibble)
// and column 4(p + 4) + k (high nibble): chunks p and p + 4. x = d·sc·q − dmin·m.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q4_kx16.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/interleaved-inl.h"

#ifndef NEXTN_KERNELS_FORMAT_Q4_KX16_LAYOUT  // this file is compiled once per target
#define NEXTN_KERNELS_FORMAT_Q4_KX16_LAYOUT
#include "kernels/kquant_scales.h"
namespace nextn {
// The layout's bytes, read one value at a time (the scalar code, rows, repacking).
struct Q4_Kx16Bytes {
  static constexpr int kElems = 256, kBlockBytes = 2368, kUnits = 8, kUnitElems = 32, kOffset = 0, kMaxValue = 15, kStep = 1;
  static constexpr bool kHasMin = true;
  static constexpr int kMin = 32, kSc = 64, kM = 192, kQs = 320;  // byte offsets in a block
  static int at(int u, int i, int o) { return kQs + 256 * u + 64 * (i / 4 % 4) + 4 * o + i % 4; }
  static bool high(int i) { return i >= 16; }  // chunks 4..7
  static int value(const uint8_t* block, int u, int i, int o) {
    const int byte = block[at(u, i, o)];
    return high(i) ? byte >> 4 : byte & 0xF;
  }
  static float scale_at(const uint8_t* block, int u, int o) {
    return static_cast<float>(block[kSc + 16 * u + o]) * load_f16(block + 2 * o);
  }
  static float min_at(const uint8_t* block, int u, int o) {
    return static_cast<float>(block[kM + 16 * u + o]) * -load_f16(block + kMin + 2 * o);
  }
  // Row o from the file's block {fp16 d, dmin; scales[12]; qs[128]}: sub-block u in the
  // low (even u) or high nibbles of qs[32(u/2) ..]. Writes every byte of row o's share.
  static void put(uint8_t* block, int o, const uint8_t* in) {
    std::memcpy(block + 2 * o, in, 2);
    std::memcpy(block + kMin + 2 * o, in + 2, 2);
    int sc[8], m[8];
    unpack_scale_min_k4(in + 4, sc, m);
    uint8_t q[256];  // element 32u + i
    for (int pair = 0; pair < 4; ++pair)
      for (int i = 0; i < 32; ++i) {
        q[64 * pair + i] = in[16 + 32 * pair + i] & 0xF;
        q[64 * pair + 32 + i] = in[16 + 32 * pair + i] >> 4;
      }
    for (int u = 0; u < kUnits; ++u) {
      block[kSc + 16 * u + o] = static_cast<uint8_t>(sc[u]);
      block[kM + 16 * u + o] = static_cast<uint8_t>(m[u]);
      const uint8_t* v = q + 32 * u;
      uint8_t* out = block + at(u, 0, o);
      for (int p = 0; p < 4; ++p)  // chunk p: columns 4p.. (low nibbles) and 16 + 4p.. (high)
        for (int k = 0; k < 4; ++k) out[64 * p + k] = static_cast<uint8_t>(v[4 * p + k] | v[16 + 4 * p + k] << 4);
    }
  }
};
}  // namespace nextn
#endif

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q4_Kx16Layout : Q4_Kx16Bytes {
#if NEXTN_INTERLEAVED_SIMD
  static VI chunk(const uint8_t* block, int u, int c, int lane0) {
    const VI packed = load_i(block + kQs + 256 * u + 64 * (c % 4) + 4 * lane0);
    return and_i(c < 4 ? packed : shift_right16(packed, 4), bytes_i(0xF));
  }
  static VF unit_scale(const uint8_t* block, int u, int lane0) {
    return mul_f(u8s(block + kSc + 16 * u + lane0), f16s(block + 2 * lane0));
  }
  static VF unit_min(const uint8_t* block, int u, int lane0) {
    return mul_f(u8s(block + kM + 16 * u + lane0), neg_f(f16s(block + kMin + 2 * lane0)));
  }
#endif
};

void MatmulQ4_Kx16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  interleaved_matmul<Q4_Kx16Layout>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {
namespace {
HWY_EXPORT(MatmulQ4_Kx16);
void matmul_q4_kx16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ4_Kx16)(job, o_begin, o_end);
}
}  // namespace

extern const WeightFormat kQ4_Kx16Format = {DType::kQ4_Kx16, nullptr, nullptr, matmul_q4_kx16, 16,
                                            dequantize_interleaved_row<Q4_Kx16Bytes, DType::kQ4_Kx16>};
extern const Interleaving kQ4_Kx16Interleaving = {DType::kQ4_K, DType::kQ4_Kx16,
                                                 repack_interleaved<Q4_Kx16Bytes, DType::kQ4_K, DType::kQ4_Kx16>};
}  // namespace nextn
#endif  // HWY_ONCE
