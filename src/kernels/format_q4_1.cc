// kernels/format_q4_1.cc — Q4_1: 32 elements per 20-byte block, {fp16 d; fp16 m; uint8 qs[16]};
// x = d·nibble + m, nibbles in Q4_0's order. Quantizer: d = (max − min)/15, m = min.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q4_1.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q4_1Unpacker {
  static constexpr int kBlockBytes = 20;
  static constexpr int kGroups = 1;
  static constexpr bool kSigned = false, kSubScales = false, kHasMin = true;
  struct Header {
    float d;  // step
    float m;  // offset added to every element
  };
  static void header(const uint8_t* block, Header& h) {
    h.d = load_f16(block);
    h.m = load_f16(block + 2);
  }
  static void group(D8 d, const uint8_t* block, const Header&, int, V8* out) {
    for (size_t k = 0; k < kVecs; ++k) out[k] = split_nibbles(d, block + 4, k);
  }
  static float scale(const Header& h, int) { return h.d; }
  static void mins(const Header& h, float* out) { *out = h.m; }
};

void MatmulQ4_1(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  quant_matmul_outputs<Q4_1Unpacker>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

namespace nextn {
namespace {

HWY_EXPORT(MatmulQ4_1);

void matmul_q4_1(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ4_1)(job, o_begin, o_end);
}

void dequantize_q4_1(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* p = blocks + b * 20;
    const float d = load_f16(p), m = load_f16(p + 2);
    for (int j = 0; j < 16; ++j) {
      out[b * 32 + j] = d * static_cast<float>(p[4 + j] & 0xF) + m;
      out[b * 32 + j + 16] = d * static_cast<float>(p[4 + j] >> 4) + m;
    }
  }
}

void quantize_q4_1(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    uint8_t* p = blocks + b * 20;
    float lo = xb[0], hi = xb[0];
    for (int i = 1; i < 32; ++i) lo = std::fmin(lo, xb[i]), hi = std::fmax(hi, xb[i]);
    const uint16_t d16 = f16_at_least((hi - lo) / 15.0f), m16 = f32_to_f16(lo);
    store_f16(p, d16);
    store_f16(p + 2, m16);
    const float d = f16_to_f32(d16), m = f16_to_f32(m16);
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; ++j) {
      const int a = round_clamp((xb[j] - m) * inv, 0, 15), c = round_clamp((xb[j + 16] - m) * inv, 0, 15);
      p[4 + j] = static_cast<uint8_t>(a | (c << 4));
    }
  }
}

}  // namespace

extern const WeightFormat kQ4_1Format = {DType::kQ4_1, dequantize_q4_1, quantize_q4_1, matmul_q4_1};

}  // namespace nextn
#endif  // HWY_ONCE
