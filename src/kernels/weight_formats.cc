// kernels/weight_formats.cc — the table of quantized weight formats (one line each)
// and the quantization of activation rows that every format's matmul consumes.
#include <cmath>
#include <cstdlib>

#include "kernels/weight_format.h"

namespace nextn {

// Defined one per file (format_<name>.cc).
extern const WeightFormat kQ8_0Format;
extern const WeightFormat kQ4_0Format;
extern const WeightFormat kQ4_1Format;
extern const WeightFormat kQ5_0Format;
extern const WeightFormat kQ5_1Format;
extern const WeightFormat kQ4_KFormat;
extern const WeightFormat kQ5_KFormat;
extern const WeightFormat kQ6_KFormat;
extern const WeightFormat kMlx4G32Format, kMlx4G64Format, kMlx4G128Format;
extern const WeightFormat kMlx8G32Format, kMlx8G64Format, kMlx8G128Format;
extern const WeightFormat kQ8_0x16Format, kQ4_Kx16Format, kQ6_Kx16Format;
extern const Interleaving kQ8_0x16Interleaving, kQ4_Kx16Interleaving, kQ6_Kx16Interleaving;

const WeightFormat* weight_format(DType dtype) {
  static const WeightFormat* const table[] = {
      &kQ8_0Format, &kQ4_0Format, &kQ4_1Format, &kQ5_0Format,
      &kQ5_1Format, &kQ4_KFormat, &kQ5_KFormat, &kQ6_KFormat,
      &kMlx4G32Format, &kMlx4G64Format, &kMlx4G128Format, &kMlx8G32Format, &kMlx8G64Format, &kMlx8G128Format,
      &kQ8_0x16Format, &kQ4_Kx16Format, &kQ6_Kx16Format,
  };
  for (const WeightFormat* f : table)
    if (f->dtype == dtype) return f;
  return nullptr;
}

const Interleaving* interleaving(DType file) {
  static const Interleaving* const table[] = {&kQ8_0x16Interleaving, &kQ4_Kx16Interleaving,
                                              &kQ6_Kx16Interleaving};
  for (const Interleaving* i : table)
    if (i->file == file) return i;
  return nullptr;
}

void quantize_rows(const float* x, int64_t n_rows, int64_t cols, int8_t* q, float* scale, float* sum,
                   int32_t* qsum, QuantizedRows& out) {
  const int64_t blocks = cols / kQuantGroup;
  const int64_t stride = quantized_rows_stride(cols);
  // Scalar on purpose: every row is quantized the same way on every target, it is a
  // small part of a matmul, and the weight kernels only need the integer values.
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b = 0; b < stride; ++b) {
      float* s = scale + r * stride + b;
      float* t = sum + r * stride + b;
      int32_t* u = qsum + r * 2 * stride + 2 * b;
      u[0] = u[1] = 0;
      if (b >= blocks) {
        *s = 0.0f;
        *t = 0.0f;
        continue;
      }
      const float* xb = x + r * cols + b * kQuantGroup;
      int8_t* qb = q + r * cols + b * kQuantGroup;
      float amax = 0.0f;
      for (int i = 0; i < kQuantGroup; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
      if (!(amax > 0.0f) || !std::isfinite(amax)) {
        // Zero block (or non-finite input, which then shows up as a NaN output row).
        for (int i = 0; i < kQuantGroup; ++i) qb[i] = 0;
        *s = amax > 0.0f ? NAN : 0.0f;
        *t = *s;
        continue;
      }
      const float inv = 127.0f / amax;
      int isum = 0;
      for (int i = 0; i < kQuantGroup; ++i) {
        long v = std::lrint(xb[i] * inv);
        v = v > 127 ? 127 : v < -127 ? -127 : v;
        qb[i] = static_cast<int8_t>(v);
        isum += static_cast<int>(v);
        u[i / 16] += static_cast<int32_t>(v);
      }
      *s = amax / 127.0f;
      *t = *s * static_cast<float>(isum);
    }
  }
  out.n_rows = n_rows;
  out.blocks = blocks;
  out.stride = stride;
  out.q = q;
  out.scale = scale;
  out.sum = sum;
  out.qsum = qsum;
}

}  // namespace nextn
