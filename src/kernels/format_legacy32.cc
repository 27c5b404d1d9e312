// kernels/format_legacy32.cc — ggml's first block formats, 32 elements per block under
// one fp16 scale d:
//   Q4_0  {fp16 d; uint8 qs[16]}                  x = d·(q − 8)    q: a nibble
//   Q4_1  {fp16 d; fp16 m; uint8 qs[16]}          x = d·q + m
//   Q5_0  {fp16 d; uint8 qh[4]; uint8 qs[16]}     x = d·(q − 16)   q: a nibble + 16·fifth bit
//   Q5_1  {fp16 d; fp16 m; uint8 qh[4]; uint8 qs[16]}  x = d·q + m
//   Q8_0  {fp16 d; int8 qs[32]}                   x = d·q
// Nibbles: byte j of qs holds element j (low nibble) and j + 16 (high nibble). Fifth
// bits: bit e of qh, read as a little-endian uint32, belongs to element e.
// Quantizers (llama.cpp's rules): Q4_0/Q5_0 d = max/−8 (−16), max the signed value of
// largest magnitude, so d is negative when that value is positive; Q4_1/Q5_1 d =
// (max − min)/15 (31) rounded up, m = min; Q8_0 d = amax/127.
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_legacy32.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"

#ifndef NEXTN_KERNELS_FORMAT_LEGACY32_LAYOUT  // this file is compiled once per target
#define NEXTN_KERNELS_FORMAT_LEGACY32_LAYOUT
namespace nextn {
// Where a block's fields are, for kBits = 4, 5 or 8 and with (kAffine) or without m.
template <int kBits, bool kAffine>
struct Legacy32Layout {
  static_assert((kBits == 4 || kBits == 5 || (kBits == 8 && !kAffine)));
  static constexpr int kQh = kAffine ? 4 : 2;                      // the fifth bits (kBits 5)
  static constexpr int kQs = kQh + (kBits == 5 ? 4 : 0);           // the values
  static constexpr int kBlockBytes = kQs + (kBits == 8 ? 32 : 16);
  static constexpr int kMax = kBits == 8 ? 127 : (1 << kBits) - 1;  // the largest value
  static constexpr int kZero = kAffine || kBits == 8 ? 0 : 1 << (kBits - 1);  // q − kZero (symmetric 4/5-bit)
};
}  // namespace nextn
#endif

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

template <int kBits, bool kAffine>
struct Legacy32Unpacker {
  using L = Legacy32Layout<kBits, kAffine>;
  static constexpr int kBlockBytes = L::kBlockBytes;
  static constexpr int kGroups = 1;
  static constexpr bool kSigned = kBits == 8, kSubScales = false, kHasMin = kBits != 8;
  struct Header {
    float d;  // block scale (any sign)
    float m;  // kAffine: the offset added to every element
  };
  static void header(const uint8_t* block, Header& h) {
    h.d = load_f16(block);
    if constexpr (kAffine) h.m = load_f16(block + 2);
  }
  static void group(D8 d, const uint8_t* block, const Header&, int, V8* out) {
    for (size_t k = 0; k < kVecs; ++k) {
      if constexpr (kBits == 8) {
        out[k] = hn::LoadU(d, block + L::kQs + k * hn::Lanes(d));
      } else if constexpr (kBits == 5) {
        out[k] = hn::Or(split_nibbles(d, block + L::kQs, k), fifth_bits(d, block + L::kQh, k));
      } else {
        out[k] = split_nibbles(d, block + L::kQs, k);
      }
    }
  }
  static float scale(const Header& h, int) { return h.d; }
  // The symmetric formats' offset of 8 or 16 is a min of −8d (−16d), exact.
  static void mins(const Header& h, float* out) { *out = kAffine ? h.m : -static_cast<float>(L::kZero) * h.d; }
#if NEXTN_QUANT_PAIRS
  // This block's values and, when `both`, the next block's, as one vector (AVX-512).
  static V64 block_pair(const uint8_t* block, bool both)
    requires(kBits == 8 || (kBits == 4 && !kAffine))
  {
    const uint8_t* next = both ? block + kBlockBytes + L::kQs : nullptr;
    if constexpr (kBits == 8) return bytes_of_block_pair(block + L::kQs, next);
    return nibbles_of_block_pair(block + L::kQs, next);
  }
#endif
};

void MatmulLegacy32(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end, DType type) {
  quant_matmul_of<FormatCase<DType::kQ4_0, Legacy32Unpacker<4, false>>, FormatCase<DType::kQ4_1, Legacy32Unpacker<4, true>>,
                  FormatCase<DType::kQ5_0, Legacy32Unpacker<5, false>>, FormatCase<DType::kQ5_1, Legacy32Unpacker<5, true>>,
                  FormatCase<DType::kQ8_0, Legacy32Unpacker<8, false>>>(job, o_begin, o_end, type);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {
// The scalar side: dequantizer, quantizer and table entry of each format.

// Value q of element i of the block at p (without the offset kZero); qh: the block's
// fifth bits as a little-endian uint32 (5-bit formats).
template <int kBits, bool kAffine>
static int value_of(const uint8_t* p, uint32_t qh, int i) {
  using L = Legacy32Layout<kBits, kAffine>;
  if constexpr (kBits == 8) return static_cast<int8_t>(p[L::kQs + i]);
  const int nibble = i < 16 ? p[L::kQs + i] & 0xF : p[L::kQs + i - 16] >> 4;
  if constexpr (kBits == 4) return nibble;
  return nibble | static_cast<int>((qh >> i) & 1) << 4;
}

// The block's header fields are read once per block, not per element.
template <int kBits, bool kAffine>
static void dequantize_legacy32(const uint8_t* blocks, int64_t n, float* out) {
  using L = Legacy32Layout<kBits, kAffine>;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* p = blocks + b * L::kBlockBytes;
    const float d = load_f16(p), m = kAffine ? load_f16(p + 2) : 0.0f;
    uint32_t qh = 0;
    if constexpr (kBits == 5) std::memcpy(&qh, p + L::kQh, 4);
    for (int i = 0; i < 32; ++i) {
      const int q = value_of<kBits, kAffine>(p, qh, i);
      out[b * 32 + i] = kAffine ? d * static_cast<float>(q) + m : d * static_cast<float>(q - L::kZero);
    }
  }
}

template <int kBits, bool kAffine>
static void quantize_legacy32(const float* x, int64_t n, uint8_t* blocks) {
  using L = Legacy32Layout<kBits, kAffine>;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    uint8_t* p = blocks + b * L::kBlockBytes;
    float m = 0.0f, inv = 0.0f;  // x ≈ (q − kZero) / inv + m
    if constexpr (kAffine) {
      float lo = xb[0], hi = xb[0];
      for (int i = 1; i < 32; ++i) lo = std::fmin(lo, xb[i]), hi = std::fmax(hi, xb[i]);
      const uint16_t d16 = f16_at_least((hi - lo) / static_cast<float>(L::kMax)), m16 = f32_to_f16(lo);
      store_f16(p, d16);
      store_f16(p + 2, m16);
      const float d = f16_to_f32(d16);
      m = f16_to_f32(m16);
      inv = d != 0.0f ? 1.0f / d : 0.0f;
    } else {
      float max = 0.0f;  // Q8_0: the largest magnitude; else the signed value of largest magnitude
      for (int i = 0; i < 32; ++i) {
        if constexpr (kBits == 8) max = std::fmax(max, std::fabs(xb[i]));
        else if (std::fabs(xb[i]) > std::fabs(max)) max = xb[i];
      }
      const uint16_t d16 = f32_to_f16(kBits == 8 ? max / 127.0f : max / -static_cast<float>(L::kZero));
      store_f16(p, d16);
      const float d = f16_to_f32(d16);
      inv = d != 0.0f ? 1.0f / d : 0.0f;
    }
    int q[32];
    for (int i = 0; i < 32; ++i) {
      if constexpr (kAffine) q[i] = round_clamp((xb[i] - m) * inv, 0, L::kMax);
      else if constexpr (kBits == 8) q[i] = round_clamp(xb[i] * inv, -127, 127);
      else q[i] = round_clamp(xb[i] * inv + static_cast<float>(L::kZero), 0, L::kMax);
    }
    if constexpr (kBits == 8) {
      for (int i = 0; i < 32; ++i) p[L::kQs + i] = static_cast<uint8_t>(static_cast<int8_t>(q[i]));
    } else {
      uint32_t qh = 0;
      for (int j = 0; j < 16; ++j) {
        p[L::kQs + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
        qh |= static_cast<uint32_t>(q[j] >> 4) << j | static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
      }
      if constexpr (kBits == 5) std::memcpy(p + L::kQh, &qh, 4);
    }
  }
}

NEXTN_EXPORT_FORMAT_MATMUL(MatmulLegacy32, matmul_legacy32)

extern const WeightFormat kQ4_0Format = {DType::kQ4_0, dequantize_legacy32<4, false>, quantize_legacy32<4, false>,
                                         matmul_legacy32<DType::kQ4_0>};
extern const WeightFormat kQ4_1Format = {DType::kQ4_1, dequantize_legacy32<4, true>, quantize_legacy32<4, true>,
                                         matmul_legacy32<DType::kQ4_1>};
extern const WeightFormat kQ5_0Format = {DType::kQ5_0, dequantize_legacy32<5, false>, quantize_legacy32<5, false>,
                                         matmul_legacy32<DType::kQ5_0>};
extern const WeightFormat kQ5_1Format = {DType::kQ5_1, dequantize_legacy32<5, true>, quantize_legacy32<5, true>,
                                         matmul_legacy32<DType::kQ5_1>};
extern const WeightFormat kQ8_0Format = {DType::kQ8_0, dequantize_legacy32<8, false>, quantize_legacy32<8, false>,
                                         matmul_legacy32<DType::kQ8_0>};

}  // namespace nextn
#endif  // HWY_ONCE
