// kernels/format_q5_0.cc — Q5_0: 32 elements per 22-byte block,
// {fp16 d; uint8 qh[4]; uint8 qs[16]}; q = nibble | (bit e of qh, a little-endian
// uint32) << 4 and x = d·(q − 16). Quantizer: d = max/−16 (signed, as Q4_0).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_q5_0.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q5_0Unpacker {
  static constexpr int kBlockBytes = 22;
  static constexpr int kGroups = 1;
  static constexpr bool kSigned = false, kSubScales = false, kHasMin = true;
  struct Header {
    float d;  // block scale (any sign)
  };
  static void header(const uint8_t* block, Header& h) { h.d = load_f16(block); }
  // Bytes 2..5 hold the fifth bits (bit e for element e).
  static void group(D8 d, const uint8_t* block, const Header&, int, V8* out) {
    for (size_t k = 0; k < kVecs; ++k) out[k] = hn::Or(split_nibbles(d, block + 6, k), fifth_bits(d, block + 2, k));
  }
  static float scale(const Header& h, int) { return h.d; }
  static void mins(const Header& h, float* out) { *out = -16.0f * h.d; }  // the values' offset of 16, exact
};

void MatmulQ5_0(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  quant_matmul_outputs<Q5_0Unpacker>(job, o_begin, o_end);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>

namespace nextn {
namespace {

HWY_EXPORT(MatmulQ5_0);

void matmul_q5_0(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQ5_0)(job, o_begin, o_end);
}

void dequantize_q5_0(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* p = blocks + b * 22;
    const float d = load_f16(p);
    uint32_t qh;
    std::memcpy(&qh, p + 2, 4);
    for (int j = 0; j < 16; ++j) {
      const int lo = (p[6 + j] & 0xF) | (((qh >> j) & 1) << 4);
      const int hi = (p[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      out[b * 32 + j] = d * static_cast<float>(lo - 16);
      out[b * 32 + j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

void quantize_q5_0(const float* x, int64_t n, uint8_t* blocks) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    uint8_t* p = blocks + b * 22;
    float max = 0.0f;
    for (int i = 0; i < 32; ++i)
      if (std::fabs(xb[i]) > std::fabs(max)) max = xb[i];
    const uint16_t d16 = f32_to_f16(max / -16.0f);
    store_f16(p, d16);
    const float d = f16_to_f32(d16);
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int lo = round_clamp(xb[j] * inv + 16.0f, 0, 31), hi = round_clamp(xb[j + 16] * inv + 16.0f, 0, 31);
      p[6 + j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + 16);
    }
    std::memcpy(p + 2, &qh, 4);
  }
}

}  // namespace

extern const WeightFormat kQ5_0Format = {DType::kQ5_0, dequantize_q5_0, quantize_q5_0, matmul_q5_0};

}  // namespace nextn
#endif  // HWY_ONCE
