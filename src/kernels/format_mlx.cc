// kernels/format_mlx.cc — MLX affine weights (mlx.core.quantize, mode "affine"): x =
// scale·q + bias per group of 32, 64 or 128 consecutive inputs, q unsigned 4- or 8-bit.
//
// MLX stores three tensors (packed uint32 values, scales, biases in the model's float
// type); io/mlx_checkpoint.cc repacks them at load into one block per group:
//   {f32 scale; f32 bias; values}
// with the 4-bit values of each 32-element part in ggml's nibble order (byte j holds
// element j in its low and element j+16 in its high nibble) and 8-bit values one per
// byte. Float32 keeps bf16 and f16 scales exact; it costs 4 bytes per group more than
// the file (4.5 → 5 bits per weight at 4-bit, group 64).
// Quantizer (MLX's, for tests and tools): n = 2^bits − 1, s = max((max − min)/n, 1e-7);
// the edge of larger magnitude (min, or max with s negated) is made exact: q0 =
// round(edge/s), and if q0 ≠ 0 then s = edge/q0, bias = edge (else bias = 0).
#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_mlx.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/quant_matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

template <int Bits, int Group>
struct MlxUnpacker {
  static constexpr int kBlockBytes = 8 + Group * Bits / 8;
  static constexpr int kGroups = Group / kQuantGroup;
  // 8-bit values go in as q − 128 (two's complement bytes), the bias taking up 128 steps.
  static constexpr bool kSigned = Bits == 8, kSubScales = false, kHasMin = true;
  struct Header {
    float scale;  // step (may be negative)
    float bias;   // offset added to every element
  };
  static void header(const uint8_t* block, Header& h) {
    std::memcpy(&h.scale, block, 4);
    std::memcpy(&h.bias, block + 4, 4);
  }
  static void group(D8 d, const uint8_t* block, const Header&, int g, V8* out) {
    const uint8_t* values = block + 8 + g * (kQuantGroup * Bits / 8);
    if constexpr (Bits == 4) {
      for (size_t k = 0; k < kVecs; ++k) out[k] = split_nibbles(d, values, k);
    } else {
      for (size_t k = 0; k < kVecs; ++k) out[k] = hn::Xor(hn::LoadU(d, values + k * hn::Lanes(d)), hn::Set(d, 0x80));
    }
  }
  static float scale(const Header& h, int) { return h.scale; }
  static void mins(const Header& h, float* out) {
    for (int g = 0; g < kGroups; ++g) out[g] = Bits == 8 ? h.bias + 128.0f * h.scale : h.bias;
  }
};

void MatmulMlx(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end, DType type) {
  quant_matmul_of<FormatCase<DType::kMlx4G32, MlxUnpacker<4, 32>>, FormatCase<DType::kMlx4G64, MlxUnpacker<4, 64>>,
                  FormatCase<DType::kMlx4G128, MlxUnpacker<4, 128>>, FormatCase<DType::kMlx8G32, MlxUnpacker<8, 32>>,
                  FormatCase<DType::kMlx8G64, MlxUnpacker<8, 64>>, FormatCase<DType::kMlx8G128, MlxUnpacker<8, 128>>>(
      job, o_begin, o_end, type);
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {
// The scalar side: the repacked blocks' values, dequantizer and quantizer, and MLX's packing.

template <int Bits, int Group>
static constexpr int kBlockBytes = 8 + Group * Bits / 8;

// The value of element i (< Group) of a repacked block.
template <int Bits>
static int value_at(const uint8_t* values, int i) {
  if constexpr (Bits == 8) {
    return values[i];
  } else {
    const uint8_t* part = values + i / 32 * 16;
    const int j = i % 32;
    return j < 16 ? part[j] & 0xF : part[j - 16] >> 4;
  }
}

template <int Bits>
static void set_value(uint8_t* values, int i, int q) {
  if constexpr (Bits == 8) {
    values[i] = static_cast<uint8_t>(q);
  } else {
    uint8_t* part = values + i / 32 * 16;
    const int j = i % 32;
    if (j < 16) part[j] = static_cast<uint8_t>((part[j] & 0xF0) | q);
    else part[j - 16] = static_cast<uint8_t>((part[j - 16] & 0x0F) | (q << 4));
  }
}

template <int Bits, int Group>
static void dequantize_mlx(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / Group; ++b) {
    const uint8_t* p = blocks + b * kBlockBytes<Bits, Group>;
    float scale, bias;
    std::memcpy(&scale, p, 4);
    std::memcpy(&bias, p + 4, 4);
    for (int i = 0; i < Group; ++i) out[b * Group + i] = scale * static_cast<float>(value_at<Bits>(p + 8, i)) + bias;
  }
}

template <int Bits, int Group>
static void quantize_mlx(const float* x, int64_t n, uint8_t* blocks) {
  const float levels = static_cast<float>((1 << Bits) - 1);
  for (int64_t b = 0; b < n / Group; ++b) {
    const float* xb = x + b * Group;
    uint8_t* p = blocks + b * kBlockBytes<Bits, Group>;
    float lo = xb[0], hi = xb[0];
    for (int i = 1; i < Group; ++i) lo = std::fmin(lo, xb[i]), hi = std::fmax(hi, xb[i]);
    float scale = std::fmax((hi - lo) / levels, 1e-7f);
    float edge = lo;
    if (!(std::fabs(lo) > std::fabs(hi))) {
      scale = -scale;
      edge = hi;
    }
    const float q0 = std::rint(edge / scale);
    float bias = 0.0f;
    if (q0 != 0.0f) {
      scale = edge / q0;
      bias = edge;
    }
    std::memcpy(p, &scale, 4);
    std::memcpy(p + 4, &bias, 4);
    std::memset(p + 8, 0, Group * Bits / 8);
    for (int i = 0; i < Group; ++i) set_value<Bits>(p + 8, i, round_clamp((xb[i] - bias) / scale, 0, (1 << Bits) - 1));
  }
}

// Packs one MLX group: `packed` holds Group·Bits/32 little-endian uint32 words with the
// values least-significant bits first (element 0 in bits 0..Bits−1 of word 0).
void repack_mlx_group(int bits, int group, const uint32_t* packed, float scale, float bias, uint8_t* block) {
  std::memcpy(block, &scale, 4);
  std::memcpy(block + 4, &bias, 4);
  uint8_t* values = block + 8;
  std::memset(values, 0, static_cast<size_t>(group * bits / 8));
  const int per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  for (int i = 0; i < group; ++i) {
    const int q = static_cast<int>((packed[i / per_word] >> (bits * (i % per_word))) & mask);
    if (bits == 8) set_value<8>(values, i, q);
    else set_value<4>(values, i, q);
  }
}

NEXTN_EXPORT_FORMAT_MATMUL(MatmulMlx, matmul_mlx)

template <int Bits, int Group, DType kType>
static constexpr WeightFormat mlx_format() {
  return {kType, dequantize_mlx<Bits, Group>, quantize_mlx<Bits, Group>, matmul_mlx<kType>};
}

extern const WeightFormat kMlx4G32Format = mlx_format<4, 32, DType::kMlx4G32>();
extern const WeightFormat kMlx4G64Format = mlx_format<4, 64, DType::kMlx4G64>();
extern const WeightFormat kMlx4G128Format = mlx_format<4, 128, DType::kMlx4G128>();
extern const WeightFormat kMlx8G32Format = mlx_format<8, 32, DType::kMlx8G32>();
extern const WeightFormat kMlx8G64Format = mlx_format<8, 64, DType::kMlx8G64>();
extern const WeightFormat kMlx8G128Format = mlx_format<8, 128, DType::kMlx8G128>();

}  // namespace nextn
#endif  // HWY_ONCE
