// kernels/format_q4_0.cc — Q4_0: 32 elements per 18-byte block, {fp16 d; uint8 qs[16]};
// x = d·(nibble − 8), byte j holding element j (low nibble) and j+16 (high nibble).
// Quantizer (llama.cpp's rule): d = max/−8 where max is the signed value of largest
// magnitude, so d is negative when that value is positive.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q4_0.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q4_0Unpacker {
  static constexpr int kBlockBytes = 18;
  static constexpr int kGroups = 1;
  static constexpr bool kSigned = false, kSubScales = false, kHasMin = true;
  struct Header {
    float d;  // block scale (any sign)
  };
  static void header(const uint8_t* block, Header& h) { h.d = load_f16(block); }
  static void group(D8 d, const uint8_t* block, const Header&, int, V8* out) {
    for (size_t k = 0; k < kVecs; ++k) out[k] = split_nibbles(d, block + 2, k);
  }
  static float scale(const Header& h, int) { return h.d; }
  static void mins(const Header& h, float* out) { *out = -8.0f * h.d; }  // the nibbles' offset of 8, exact
#if NEXTN_QUANT_PAIRS
  // 128-bit lanes: this block's low, high nibbles, then the next block's (qs at +20).
  static V64 block_pair(const uint8_t* block, bool both) {
    const __m256i first = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
    const __m512i raw =
        both ? _mm512_inserti64x4(_mm512_castsi256_si512(first),
                                  _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 20))), 1)
             : _mm512_zextsi256_si512(first);
    const uint64_t four = 0x0004000400040004ull;
    return V64{_mm512_and_si512(_mm512_srlv_epi16(raw, _mm512_set_epi64(four, four, 0, 0, four, four, 0, 0)),
                                _mm512_set1_epi8(0xF))};
  }
#endif
};

void MatmulQ4_0(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  quant_matmul_outputs<Q4_0Unpacker>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

namespace nextn {
namespace {

HWY_EXPORT(MatmulQ4_0);

void matmul_q4_0(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ4_0)(job, o_begin, o_end);
}

void dequantize_q4_0(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* p = blocks + b * 18;
    const float d = load_f16(p);
    for (int j = 0; j < 16; ++j) {
      out[b * 32 + j] = d * static_cast<float>((p[2 + j] & 0xF) - 8);
      out[b * 32 + j + 16] = d * static_cast<float>((p[2 + j] >> 4) - 8);
    }
  }
}

void quantize_q4_0(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    uint8_t* p = blocks + b * 18;
    float max = 0.0f;
    for (int i = 0; i < 32; ++i)
      if (std::fabs(xb[i]) > std::fabs(max)) max = xb[i];
    const uint16_t d16 = f32_to_f16(max / -8.0f);
    store_f16(p, d16);
    const float d = f16_to_f32(d16);
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; ++j) {
      const int lo = round_clamp(xb[j] * inv + 8.0f, 0, 15), hi = round_clamp(xb[j + 16] * inv + 8.0f, 0, 15);
      p[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace

extern const WeightFormat kQ4_0Format = {DType::kQ4_0, dequantize_q4_0, quantize_q4_0, matmul_q4_0};

}  // namespace nextn
#endif  // HWY_ONCE
