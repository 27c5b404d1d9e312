// kernels/format_q8_0.cc — Q8_0: 32 elements per 34-byte block, {fp16 d; int8 qs[32]};
// x = d·qs[i]. Quantizer: d = amax/127, qs = round(x/d).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q8_0.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q8_0Unpacker {
  static constexpr int kBlockBytes = 34;
  static constexpr int kGroups = 1;
  static constexpr bool kSigned = true, kSubScales = false, kHasMin = false;
  struct Header {
    float d;  // block scale
  };
  static void header(const uint8_t* block, Header& h) { h.d = load_f16(block); }
  static void group(D8 d, const uint8_t* block, const Header&, int, V8* out) {
    for (size_t k = 0; k < kVecs; ++k) out[k] = hn::LoadU(d, block + 2 + k * hn::Lanes(d));
  }
  static float scale(const Header& h, int) { return h.d; }
#if NEXTN_QUANT_PAIRS
  static V64 block_pair(const uint8_t* block, bool both) {  // the next block's qs at +36
    const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    return V64{both ? _mm512_inserti64x4(_mm512_castsi256_si512(first),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 36)), 1)
                    : _mm512_zextsi256_si512(first)};
  }
#endif
};

void MatmulQ8_0(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  quant_matmul_outputs<Q8_0Unpacker>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

namespace nextn {
namespace {

HWY_EXPORT(MatmulQ8_0);

void matmul_q8_0(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ8_0)(job, o_begin, o_end);
}

void dequantize_q8_0(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* p = blocks + b * 34;
    const float d = load_f16(p);
    for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * static_cast<float>(static_cast<int8_t>(p[2 + i]));
  }
}

void quantize_q8_0(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    uint8_t* p = blocks + b * 34;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const uint16_t d16 = f32_to_f16(amax / 127.0f);
    store_f16(p, d16);
    const float d = f16_to_f32(d16);
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < 32; ++i) p[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(round_clamp(xb[i] * inv, -127, 127)));
  }
}

}  // namespace

extern const WeightFormat kQ8_0Format = {DType::kQ8_0, dequantize_q8_0, quantize_q8_0, matmul_q8_0};

}  // namespace nextn
#endif  // HWY_ONCE
