// kernels/format_k_quants.cc — ggml's K-quants, 256 elements per block under one fp16
// scale d of integer sub-block scales:
//   Q4_K  144 bytes {fp16 d; fp16 dmin; uint8 scales[12]; uint8 qs[128]}
//   Q5_K  176 bytes {fp16 d; fp16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]}
//     8 sub-blocks of 32 with a 6-bit scale sc[j] and min m[j] (kquant_scales.h):
//     x = d·sc[j]·q − dmin·m[j]. Byte qs[32c + l] holds element 64c + l (low nibble,
//     sub-block 2c) and 64c + 32 + l (high nibble, sub-block 2c+1); Q5_K adds a fifth
//     bit, q = nibble + 16·((qh[l] >> j) & 1) for element l of sub-block j.
//   Q6_K  210 bytes {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; fp16 d} (d last):
//     16 sub-blocks of 16 with signed scales, x = d·scales[e/16]·(q − 32), q in 0..63.
//     Two halves of 128 elements (ql += 64, qh += 32); within a half, element 32k + l
//     (l < 32) takes the low (k = 0, 1) or high (k = 2, 3) nibble of ql[l + 32·(k % 2)]
//     and bits 2k, 2k+1 of qh[l].
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_k_quants.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"
#include "kernels/kquant_scales.h"

#ifndef NEXTN_KERNELS_FORMAT_K_QUANTS_LAYOUT  // this file is compiled once per target
#define NEXTN_KERNELS_FORMAT_K_QUANTS_LAYOUT
namespace nextn {
// Q4_K (kBits 4) and Q5_K (kBits 5): where the nibbles start, and the block's size.
template <int kBits>
struct KQuantLayout {
  static constexpr int kQs = kBits == 5 ? 48 : 16;  // Q5_K: after qh[32] at byte 16
  static constexpr int kBlockBytes = kQs + 128;
};
}  // namespace nextn
#endif

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

// Q4_K (kBits 4) and Q5_K (kBits 5).
template <int kBits>
struct KQuantUnpacker {
  static constexpr int kQs = KQuantLayout<kBits>::kQs;
  static constexpr int kBlockBytes = KQuantLayout<kBits>::kBlockBytes;
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
    const uint8_t* qs = block + kQs + 32 * (g / 2);
    for (size_t k = 0; k < kVecs; ++k) {
      out[k] = nibbles_of_32(d, qs, k, g % 2 == 1);
      if constexpr (kBits == 5) {
        const V8 qh = hn::LoadU(d, block + 16 + k * hn::Lanes(d));
        out[k] = hn::Or(out[k], hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(qh, g), hn::Set(d, 1))));
      }
    }
  }
  static void sub_scales(const Header& h, int g, int& lo, int& hi) { lo = hi = h.sc[g]; }
#if NEXTN_QUANT_PAIRS
  static constexpr int kPairOffset = 0;
  static V64 pair(const uint8_t* block, const Header&, int c) {
    if constexpr (kBits == 5) return hn::Or(nibble_pair(block + kQs + 32 * c), high_bits_pair(block + 16, 2 * c, 1, 1));
    return nibble_pair(block + kQs + 32 * c);
  }
  static constexpr int kPairSubScales = 1;
  static V16x32 pair_sub_scales(const Header& h) { return sub_scales_u8(h.sc); }
#endif
  static float scale(const Header& h, int) { return h.d; }
  static void mins(const Header& h, float* out) { kquant_mins(h.m, h.dmin, out); }
};

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

void MatmulKQuants(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end, DType type) {
  quant_matmul_of<FormatCase<DType::kQ4_K, KQuantUnpacker<4>>, FormatCase<DType::kQ5_K, KQuantUnpacker<5>>,
                  FormatCase<DType::kQ6_K, Q6_KUnpacker>>(job, o_begin, o_end, type);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {
// The scalar side: dequantizers, quantizers and table entries.

// Q4_K and Q5_K: value q of element l of sub-block j.
template <int kBits>
static int kquant_value(const uint8_t* p, int j, int l) {
  const uint8_t* qs = p + KQuantLayout<kBits>::kQs + 32 * (j / 2);
  const int nibble = j % 2 ? qs[l] >> 4 : qs[l] & 0xF;
  return kBits == 5 ? nibble + 16 * ((p[16 + l] >> j) & 1) : nibble;
}

template <int kBits>
static void dequantize_kquant(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = blocks + b * KQuantLayout<kBits>::kBlockBytes;
    const float d = load_f16(p), dmin = load_f16(p + 2);
    int sc[8], m[8];
    unpack_scale_min_k4(p + 4, sc, m);
    float* y = out + b * 256;
    for (int j = 0; j < 8; ++j)
      for (int l = 0; l < 32; ++l)
        y[32 * j + l] = d * static_cast<float>(sc[j]) * static_cast<float>(kquant_value<kBits>(p, j, l)) -
                        dmin * static_cast<float>(m[j]);
  }
}

template <int kBits>
static void quantize_kquant(const float* x, int64_t n, uint8_t* blocks) {
  using L = KQuantLayout<kBits>;
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    uint8_t* p = blocks + b * L::kBlockBytes;
    uint16_t d16, dmin16;
    int sc[8], m[8];
    float step[8], offset[8];
    choose_kquant_header(xb, (1 << kBits) - 1, d16, dmin16, sc, m, step, offset);
    store_f16(p, d16);
    store_f16(p + 2, dmin16);
    pack_scale_min_k4(sc, m, p + 4);
    std::memset(p + 16, 0, L::kBlockBytes - 16);  // qh (Q5_K) and qs
    uint8_t* qs = p + L::kQs;
    for (int j = 0; j < 8; ++j) {
      const float inv = step[j] > 0.0f ? 1.0f / step[j] : 0.0f;
      for (int l = 0; l < 32; ++l) {
        const int q = round_clamp((xb[32 * j + l] + offset[j]) * inv, 0, (1 << kBits) - 1);
        qs[32 * (j / 2) + l] |= static_cast<uint8_t>(j % 2 ? (q & 0xF) << 4 : q & 0xF);
        if constexpr (kBits == 5) p[16 + l] |= static_cast<uint8_t>((q >> 4) << j);
      }
    }
  }
}

static void dequantize_q6_k(const uint8_t* blocks, int64_t n, float* out) {
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
static void quantize_q6_k(const float* x, int64_t n, uint8_t* blocks) {
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

NEXTN_EXPORT_FORMAT_MATMUL(MatmulKQuants, matmul_k_quants)

extern const WeightFormat kQ4_KFormat = {DType::kQ4_K, dequantize_kquant<4>, quantize_kquant<4>,
                                         matmul_k_quants<DType::kQ4_K>};
extern const WeightFormat kQ5_KFormat = {DType::kQ5_K, dequantize_kquant<5>, quantize_kquant<5>,
                                         matmul_k_quants<DType::kQ5_K>};
extern const WeightFormat kQ6_KFormat = {DType::kQ6_K, dequantize_q6_k, quantize_q6_k, matmul_k_quants<DType::kQ6_K>};

}  // namespace nextn
#endif  // HWY_ONCE
