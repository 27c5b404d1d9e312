// kernels/format_q6_k.cc — Q6_K: 256 elements per 210-byte block,
// {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; fp16 d} (d last): 16 sub-blocks of
// 16 with signed scales, x = d·scales[e/16]·(q − 32), q in 0..63. Two halves of 128
// elements (ql += 64, qh += 32); within a half, element 32k + l (l < 32) takes
// the low (k = 0, 1) or high (k = 2, 3) nibble of ql[l + 32·(k % 2)] and bits
// 2k, 2k+1 of qh[l].
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q6_k.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q6_KUnpacker {
  static constexpr int kBlockBytes = 210;
  static constexpr int kGroups = 8;
  // q − 32 is signed; the sub-scales are signed too.
  static constexpr bool kSigned = true, kSubScales = true, kHasMin = false;
  struct Header {
    float d;           // scale of the sub-block scales
    const int8_t* sc;  // the block's 16 sub-scales, one per 16 elements
  };
  static void header(const uint8_t* block, Header& h) {
    h.d = load_f16(block + 208);
    h.sc = reinterpret_cast<const int8_t*>(block + 192);
  }
  static void group(D8 d, const uint8_t* block, const Header&, int g, V8* out) {
    const int half = g / 4, k4 = g % 4;
    const uint8_t* ql = block + 64 * half + 32 * (k4 % 2);
    const uint8_t* qh = block + 128 + 32 * half;
    for (size_t k = 0; k < kVecs; ++k) {
      const V8 low = nibbles_of_32(d, ql, k, k4 >= 2);
      const V8 high = hn::And(hn::ShiftRightSame(hn::LoadU(d, qh + k * hn::Lanes(d)), 2 * k4), hn::Set(d, 3));
      out[k] = hn::Sub(hn::Or(low, hn::ShiftLeft<4>(high)), hn::Set(d, 32));  // two's complement bytes
    }
  }
  // Elements 0..15 of group g use sub-scale 2g, 16..31 use 2g + 1.
  static void sub_scales(const Header& h, int g, int& lo, int& hi) {
    lo = h.sc[2 * g];
    hi = h.sc[2 * g + 1];
  }
#if NEXTN_QUANT_PAIRS
  // Groups 2c, 2c+1 (c = 0..3): the low (c even) or high nibbles of 64 bytes of ql, with
  // bits 4(c%2) and 4(c%2)+2 of qh for the top two bits; q unsigned, offset 32.
  static constexpr int kPairOffset = 32;
  static V64 pair(const uint8_t* block, const Header&, int c) {
    const int half = c / 2, k4 = 2 * (c % 2);
    const V64 ql = hn::LoadU(D64(), block + 64 * half);
    const V64 low = k4 == 0 ? hn::And(ql, hn::Set(D64(), 0xF)) : hn::ShiftRight<4>(ql);
    return hn::Or(low, high_bits_pair(block + 128 + 32 * half, 2 * k4, 2, 2));
  }
  static constexpr int kPairSubScales = 2;  // one per 16 elements
  static V16x32 pair_sub_scales(const Header& h) { return sub_scales_i8(h.sc); }
#endif
  static float scale(const Header& h, int) { return h.d; }
};

void MatmulQ6_K(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  quant_matmul_outputs<Q6_KUnpacker>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

namespace nextn {
namespace {

HWY_EXPORT(MatmulQ6_K);

void matmul_q6_k(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ6_K)(job, o_begin, o_end);
}

void dequantize_q6_k(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = blocks + b * 210;
    const float d = load_f16(p + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(p + 192);
    float* y = out + b * 256;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = p + 64 * half;
      const uint8_t* qh = p + 128 + 32 * half;
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) {
          const int nib = k < 2 ? ql[l + 32 * (k % 2)] & 0xF : ql[l + 32 * (k % 2)] >> 4;
          const int q = nib | (((qh[l] >> (2 * k)) & 3) << 4);
          const int e = 128 * half + 32 * k + l;
          y[e] = d * static_cast<float>(sc[e / 16]) * static_cast<float>(q - 32);
        }
    }
  }
}

// Own simple rule: per 16 elements the step amax/31 (so q − 32 stays in −31..31),
// stored as d·sc with d = max step/127 rounded up and sc rounded up.
void quantize_q6_k(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    uint8_t* p = blocks + b * 210;
    float need[16], max_need = 0.0f;
    for (int s = 0; s < 16; ++s) {
      float amax = 0.0f;
      for (int i = 0; i < 16; ++i) amax = std::fmax(amax, std::fabs(xb[16 * s + i]));
      need[s] = amax / 31.0f;
      max_need = std::fmax(max_need, need[s]);
    }
    const uint16_t d16 = f16_at_least(max_need / 127.0f);
    store_f16(p + 208, d16);
    const float d = f16_to_f32(d16);
    int q[256];
    for (int s = 0; s < 16; ++s) {
      const int sc = d > 0.0f ? std::min(127, static_cast<int>(std::ceil(need[s] / d))) : 0;
      p[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(sc));
      const float step = d * static_cast<float>(sc);
      const float inv = step > 0.0f ? 1.0f / step : 0.0f;
      for (int i = 0; i < 16; ++i) q[16 * s + i] = round_clamp(xb[16 * s + i] * inv, -32, 31) + 32;
    }
    for (int half = 0; half < 2; ++half) {
      uint8_t* ql = p + 64 * half;
      uint8_t* qh = p + 128 + 32 * half;
      const int* qq = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                     ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

extern const WeightFormat kQ6_KFormat = {DType::kQ6_K, dequantize_q6_k, quantize_q6_k, matmul_q6_k};

}  // namespace nextn
#endif  // HWY_ONCE
