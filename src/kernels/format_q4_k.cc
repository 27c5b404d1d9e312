// kernels/format_q4_k.cc — Q4_K: 256 elements per 144-byte block,
// {fp16 d; fp16 dmin; uint8 scales[12]; uint8 qs[128]}: 8 sub-blocks of 32 with 6-bit
// scale sc[j] and min m[j] (kquant_scales.h); x = d·sc[j]·q − dmin·m[j], q in 0..15.
// Byte qs[32c + l] holds element 64c + l (low nibble, sub-block 2c) and 64c + 32 + l
// (high nibble, sub-block 2c+1).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q4_k.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"
#include "kernels/kquant_scales.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q4_KUnpacker {
  static constexpr int kBlockBytes = 144;
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
    const uint8_t* qs = block + 16 + 32 * (g / 2);
    for (size_t k = 0; k < kVecs; ++k) out[k] = nibbles_of_32(d, qs, k, g % 2 == 1);
  }
  static void sub_scales(const Header& h, int g, int& lo, int& hi) { lo = hi = h.sc[g]; }
#if NEXTN_QUANT_PAIRS
  static constexpr int kPairOffset = 0;
  static V64 pair(const uint8_t* block, const Header&, int c) { return nibble_pair(block + 16 + 32 * c); }
  static constexpr int kPairSubScales = 1;
  static V16x32 pair_sub_scales(const Header& h) { return sub_scales_u8(h.sc); }
#endif
  static float scale(const Header& h, int) { return h.d; }
  static void mins(const Header& h, float* out) { kquant_mins(h.m, h.dmin, out); }
};

void MatmulQ4_K(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  quant_matmul_outputs<Q4_KUnpacker>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

namespace nextn {
namespace {

HWY_EXPORT(MatmulQ4_K);

void matmul_q4_k(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ4_K)(job, o_begin, o_end);
}

void dequantize_q4_k(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = blocks + b * 144;
    const float d = load_f16(p), dmin = load_f16(p + 2);
    int sc[8], m[8];
    unpack_scale_min_k4(p + 4, sc, m);
    float* y = out + b * 256;
    for (int j = 0; j < 8; ++j) {
      const uint8_t* qs = p + 16 + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        const int q = j % 2 ? qs[l] >> 4 : qs[l] & 0xF;
        y[32 * j + l] = d * static_cast<float>(sc[j]) * static_cast<float>(q) - dmin * static_cast<float>(m[j]);
      }
    }
  }
}

void quantize_q4_k(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    uint8_t* p = blocks + b * 144;
    uint16_t d16, dmin16;
    int sc[8], m[8];
    float step[8], offset[8];
    choose_kquant_header(xb, 15, d16, dmin16, sc, m, step, offset);
    store_f16(p, d16);
    store_f16(p + 2, dmin16);
    pack_scale_min_k4(sc, m, p + 4);
    uint8_t* qs = p + 16;
    for (int i = 0; i < 128; ++i) qs[i] = 0;
    for (int j = 0; j < 8; ++j) {
      const float inv = step[j] > 0.0f ? 1.0f / step[j] : 0.0f;
      for (int l = 0; l < 32; ++l) {
        const int q = round_clamp((xb[32 * j + l] + offset[j]) * inv, 0, 15);
        qs[32 * (j / 2) + l] |= static_cast<uint8_t>(j % 2 ? q << 4 : q);
      }
    }
  }
}

}  // namespace

extern const WeightFormat kQ4_KFormat = {DType::kQ4_K, dequantize_q4_k, quantize_q4_k, matmul_q4_k};

}  // namespace nextn
#endif  // HWY_ONCE
