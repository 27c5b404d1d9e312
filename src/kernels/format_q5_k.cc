// kernels/format_q5_k.cc — Q5_K: 256 elements per 176-byte block,
// {fp16 d; fp16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]}: Q4_K plus a
// fifth bit, q = nibble + 16·((qh[l] >> j) & 1) for element l of sub-block j.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q5_k.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"
#include "kernels/kquant_scales.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q5_KUnpacker {
  static constexpr int kBlockBytes = 176;
  static constexpr int kGroups = 8;
  static constexpr bool kSigned = false, kSubScales = true, kHasMin = true;
  struct Header {
    float d;         // scale of the sub-block scales
    float dmin;      // scale of the sub-block minimums
    uint8_t sc[8];   // sub-block scales, the integer multipliers of the groups
    uint8_t m[8];    // sub-block minimums (x −= dmin·m[j])
  };
  static void header(const uint8_t* block, Header& h) {
    h.d = load_f16(block);
    h.dmin = load_f16(block + 2);
    unpack_scale_min_k4_bytes(block + 4, h.sc, h.m);
  }
  static void group(D8 d, const uint8_t* block, const Header&, int g, V8* out) {
    const uint8_t* qs = block + 48 + 32 * (g / 2);
    for (size_t k = 0; k < kVecs; ++k) {
      const V8 qh = hn::LoadU(d, block + 16 + k * hn::Lanes(d));
      const V8 bit = hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(qh, g), hn::Set(d, 1)));
      out[k] = hn::Or(nibbles_of_32(d, qs, k, g % 2 == 1), bit);
    }
  }
  static void sub_scales(const Header& h, int g, int& lo, int& hi) { lo = hi = h.sc[g]; }
#if NEXTN_QUANT_PAIRS
  static constexpr int kPairOffset = 0;
  static V64 pair(const uint8_t* block, const Header&, int c) {
    return hn::Or(nibble_pair(block + 48 + 32 * c), high_bits_pair(block + 16, 2 * c, 1, 1));
  }
  static constexpr int kPairSubScales = 1;
  static V16x32 pair_sub_scales(const Header& h) { return sub_scales_u8(h.sc); }
#endif
  static float scale(const Header& h, int) { return h.d; }
  static void mins(const Header& h, float* out) { kquant_mins(h.m, h.dmin, out); }
};

void MatmulQ5_K(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  quant_matmul_outputs<Q5_KUnpacker>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

namespace nextn {
namespace {

HWY_EXPORT(MatmulQ5_K);

void matmul_q5_k(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ5_K)(job, o_begin, o_end);
}

void dequantize_q5_k(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = blocks + b * 176;
    const float d = load_f16(p), dmin = load_f16(p + 2);
    int sc[8], m[8];
    unpack_scale_min_k4(p + 4, sc, m);
    const uint8_t* qh = p + 16;
    float* y = out + b * 256;
    for (int j = 0; j < 8; ++j) {
      const uint8_t* qs = p + 48 + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        const int q = (j % 2 ? qs[l] >> 4 : qs[l] & 0xF) + 16 * ((qh[l] >> j) & 1);
        y[32 * j + l] = d * static_cast<float>(sc[j]) * static_cast<float>(q) - dmin * static_cast<float>(m[j]);
      }
    }
  }
}

void quantize_q5_k(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    uint8_t* p = blocks + b * 176;
    uint16_t d16, dmin16;
    int sc[8], m[8];
    float step[8], offset[8];
    choose_kquant_header(xb, 31, d16, dmin16, sc, m, step, offset);
    store_f16(p, d16);
    store_f16(p + 2, dmin16);
    pack_scale_min_k4(sc, m, p + 4);
    uint8_t* qh = p + 16;
    uint8_t* qs = p + 48;
    for (int i = 0; i < 160; ++i) qh[i] = 0;  // qh[32] and qs[128]
    for (int j = 0; j < 8; ++j) {
      const float inv = step[j] > 0.0f ? 1.0f / step[j] : 0.0f;
      for (int l = 0; l < 32; ++l) {
        const int q = round_clamp((xb[32 * j + l] + offset[j]) * inv, 0, 31);
        qs[32 * (j / 2) + l] |= static_cast<uint8_t>(j % 2 ? (q & 0xF) << 4 : q & 0xF);
        qh[l] |= static_cast<uint8_t>((q >> 4) << j);
      }
    }
  }
}

}  // namespace

extern const WeightFormat kQ5_KFormat = {DType::kQ5_K, dequantize_q5_k, quantize_q5_k, matmul_q5_k};

}  // namespace nextn
#endif  // HWY_ONCE
