// kernels/elementwise.cc — RMSNorm, RoPE, SwiGLU, a causal conv with SiLU, softmax, dtype conversion and
// a streaming-read kernel, SIMD via Highway with run-time dispatch. Row-wise
// kernels split rows (or long vectors) over the global ThreadPool when the work
// is large enough to pay for waking it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/weight_format.h"
#include "util/error.h"
#include "util/thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Elements below which a kernel runs on the calling thread only.
constexpr int64_t kParallelThreshold = 32 * 1024;

void rms_norm_row(const float* x, const float* weight, int64_t n, float eps, float* out) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  VF acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const VF a = hn::LoadU(df, x + i), b = hn::LoadU(df, x + i + lanes);
    acc0 = hn::MulAdd(a, a, acc0);
    acc1 = hn::MulAdd(b, b, acc1);
  }
  double ss = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  const VF vs = hn::Set(df, scale);
  i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + i), vs), hn::LoadU(df, weight + i)), df, out + i);
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void RmsNormImpl(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps, float* out) {
  auto rows = [&](size_t begin, size_t end, int) {
    for (size_t r = begin; r < end; ++r) rms_norm_row(x + r * n, weight, n, eps, out + r * n);
  };
  if (n_rows * n < kParallelThreshold || n_rows == 1) {
    rows(0, static_cast<size_t>(n_rows), 0);
  } else {
    parallel_for(static_cast<size_t>(n_rows), rows);
  }
}

void swiglu_range(const float* gate, const float* up, int64_t begin, int64_t end, float* out) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const VF one = hn::Set(df, 1.0f), limit = hn::Set(df, 80.0f);
  int64_t i = begin;
  for (; i + lanes <= end; i += lanes) {
    const VF g = hn::LoadU(df, gate + i);
    const VF e = hn::Exp(df, hn::Min(hn::Neg(g), limit));  // exp(-g), clamped against overflow
    const VF silu = hn::Div(g, hn::Add(one, e));
    hn::StoreU(hn::Mul(silu, hn::LoadU(df, up + i)), df, out + i);
  }
  for (; i < end; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(std::min(-g, 80.0f))) * up[i];
  }
}

// out[i] = gelu_tanh(gate[i]) · up[i] (kGated; else out[i] = gelu_tanh(gate[i])),
// gelu_tanh(g) = g/2 · (1 + tanh(√(2/π) (g + 0.044715 g³))). The tanh argument is clamped
// to ±10, where tanh is 1 in float32, so huge gates give g·up.
template <bool kGated>
void geglu_range(const float* gate, const float* up, int64_t begin, int64_t end, float* out) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  constexpr float kC = 0.7978845608028654f, kCubic = 0.044715f, kLimit = 10.0f;
  const VF half = hn::Set(df, 0.5f), one = hn::Set(df, 1.0f), c = hn::Set(df, kC), cubic = hn::Set(df, kCubic);
  const VF hi = hn::Set(df, kLimit), lo = hn::Set(df, -kLimit);
  int64_t i = begin;
  for (; i + lanes <= end; i += lanes) {
    const VF g = hn::LoadU(df, gate + i);
    const VF inner = hn::Mul(c, hn::MulAdd(hn::Mul(cubic, g), hn::Mul(g, g), g));
    const VF t = hn::Tanh(df, hn::Min(hn::Max(inner, lo), hi));
    const VF gelu = hn::Mul(hn::Mul(half, g), hn::Add(one, t));
    hn::StoreU(kGated ? hn::Mul(gelu, hn::LoadU(df, up + i)) : gelu, df, out + i);
  }
  for (; i < end; ++i) {
    const float g = gate[i];
    const float inner = std::clamp(kC * (g + kCubic * g * g * g), -kLimit, kLimit);
    out[i] = 0.5f * g * (1.0f + std::tanh(inner)) * (kGated ? up[i] : 1.0f);
  }
}

// Runs piece(begin, end) over [0, n): on this thread when n is small, else split over
// the pool in pieces of at least 64 elements.
template <typename Piece>
void in_pieces(int64_t n, Piece piece) {
  if (n < kParallelThreshold) return piece(int64_t(0), n);
  parallel_for(
      static_cast<size_t>(n), [&](size_t begin, size_t end, int) { piece(int64_t(begin), int64_t(end)); }, 64);
}

// Channels [c0, c1) of conv_silu (kernels.h).
void conv_silu_range(const float* x, const float* w, int64_t n, int64_t channels, int taps, int64_t c0, int64_t c1,
                     float* y) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const VF one = hn::Set(df, 1.0f), limit = hn::Set(df, 80.0f);
  for (int64_t t = 0; t < n; ++t) {
    int64_t c = c0;
    for (; c + lanes <= c1; c += lanes) {
      VF acc = hn::Zero(df);
      for (int j = 0; j < taps; ++j)
        acc = hn::MulAdd(hn::LoadU(df, w + j * channels + c), hn::LoadU(df, x + (t + j) * channels + c), acc);
      const VF e = hn::Exp(df, hn::Min(hn::Neg(acc), limit));
      hn::StoreU(hn::Div(acc, hn::Add(one, e)), df, y + t * channels + c);
    }
    for (; c < c1; ++c) {
      float acc = 0.0f;
      for (int j = 0; j < taps; ++j) acc = std::fma(w[j * channels + c], x[(t + j) * channels + c], acc);
      y[t * channels + c] = acc / (1.0f + std::exp(std::min(-acc, 80.0f)));
    }
  }
}

void ConvSiluImpl(const float* x, const float* w, int64_t n, int64_t channels, int taps, float* y) {
  if (n * channels * taps < kParallelThreshold) return conv_silu_range(x, w, n, channels, taps, 0, channels, y);
  parallel_for(static_cast<size_t>(channels), [&](size_t c0, size_t c1, int) {
    conv_silu_range(x, w, n, channels, taps, int64_t(c0), int64_t(c1), y);
  }, 64);
}

void SwigluImpl(const float* gate, const float* up, int64_t n, float* out) {
  in_pieces(n, [&](int64_t begin, int64_t end) { swiglu_range(gate, up, begin, end, out); });
}

void GegluImpl(const float* gate, const float* up, int64_t n, float* out) {
  in_pieces(n, [&](int64_t begin, int64_t end) { geglu_range<true>(gate, up, begin, end, out); });
}

void GeluTanhImpl(float* x, int64_t n) {
  in_pieces(n, [&](int64_t begin, int64_t end) { geglu_range<false>(x, nullptr, begin, end, x); });
}

// x[i] = cap · tanh(x[i] / cap) on [begin, end) (Highway's Tanh holds over all finite x).
void softcap_range(float* x, int64_t begin, int64_t end, float cap) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const VF c = hn::Set(df, cap), inv = hn::Set(df, 1.0f / cap);
  int64_t i = begin;
  for (; i + lanes <= end; i += lanes) {
    const VF t = hn::Tanh(df, hn::Mul(hn::LoadU(df, x + i), inv));
    hn::StoreU(hn::Mul(c, t), df, x + i);
  }
  for (; i < end; ++i) x[i] = cap * std::tanh(x[i] * (1.0f / cap));
}

void SoftcapImpl(float* x, int64_t n, float cap) {
  in_pieces(n, [&](int64_t begin, int64_t end) { softcap_range(x, begin, end, cap); });
}

void SoftmaxImpl(float* x, int64_t n) {
  if (n <= 0) return;
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  float max_value = x[0];
  int64_t i = 0;
  if (n >= lanes) {
    VF vmax = hn::LoadU(df, x);
    for (i = lanes; i + lanes <= n; i += lanes) vmax = hn::Max(vmax, hn::LoadU(df, x + i));
    max_value = hn::GetLane(hn::MaxOfLanes(df, vmax));
  }
  for (; i < n; ++i) max_value = std::max(max_value, x[i]);
  const VF vmax = hn::Set(df, max_value);
  VF vsum = hn::Zero(df);
  i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), vmax));
    hn::StoreU(e, df, x + i);
    vsum = hn::Add(vsum, e);
  }
  double sum = hn::GetLane(hn::SumOfLanes(df, vsum));
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const VF inv = hn::Set(df, static_cast<float>(1.0 / sum));
  i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), inv), df, x + i);
  const float inv_s = static_cast<float>(1.0 / sum);
  for (; i < n; ++i) x[i] *= inv_s;
}

void ConvertRowImpl(DType dtype, const void* src, int64_t n, float* dst) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  if (dtype == DType::kF32) {
    std::copy_n(static_cast<const float*>(src), n, dst);
  } else if (dtype == DType::kF16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    const hwy::float16_t* h = static_cast<const hwy::float16_t*>(src);
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, h + i)), df, dst + i);
    const uint16_t* u = static_cast<const uint16_t*>(src);
    for (; i < n; ++i) dst[i] = f16_to_f32(u[i]);
  } else {
    const hn::Rebind<uint16_t, DF> du16;
    const hn::RebindToUnsigned<DF> du32;
    const uint16_t* u = static_cast<const uint16_t*>(src);
    for (; i + lanes <= n; i += lanes) {
      const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, u + i));
      hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(wide)), df, dst + i);
    }
    for (; i < n; ++i) dst[i] = bf16_to_f32(u[i]);
  }
}

// Each lane keeps its largest value and where it first saw it (a strict > never moves
// to a later equal value; NaN compares false, so it is never chosen); the lanes then
// settle ties by the smaller index: the first largest value overall.
int64_t ArgmaxImpl(const float* x, int64_t n) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  float best = -std::numeric_limits<float>::infinity();
  int64_t best_at = -1;
  int64_t i = 0;
  if (n >= lanes) {
    VF vbest = hn::Set(df, best);
    auto vat = hn::Set(di, -1);
    auto vi = hn::Iota(di, 0);
    const auto step = hn::Set(di, static_cast<int32_t>(lanes));
    for (; i + lanes <= n; i += lanes) {
      const VF v = hn::LoadU(df, x + i);
      const auto greater = hn::Gt(v, vbest);
      vbest = hn::IfThenElse(greater, v, vbest);
      vat = hn::IfThenElse(hn::RebindMask(di, greater), vi, vat);
      vi = hn::Add(vi, step);
    }
    alignas(64) float values[hn::MaxLanes(df)];
    alignas(64) int32_t at[hn::MaxLanes(di)];
    hn::Store(vbest, df, values);
    hn::Store(vat, di, at);
    for (int64_t l = 0; l < lanes; ++l)
      if (at[l] >= 0 && (values[l] > best || (values[l] == best && at[l] < best_at))) best = values[l], best_at = at[l];
  }
  for (; i < n; ++i)
    if (x[i] > best) best = x[i], best_at = i;
  return best_at < 0 ? 0 : best_at;
}

float StreamSumImpl(const float* data, int64_t n) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    a0 = hn::Add(a0, hn::LoadU(df, data + i));
    a1 = hn::Add(a1, hn::LoadU(df, data + i + lanes));
    a2 = hn::Add(a2, hn::LoadU(df, data + i + 2 * lanes));
    a3 = hn::Add(a3, hn::LoadU(df, data + i + 3 * lanes));
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) sum += data[i];
  return sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(SwigluImpl);
HWY_EXPORT(ConvSiluImpl);
HWY_EXPORT(GegluImpl);
HWY_EXPORT(GeluTanhImpl);
HWY_EXPORT(SoftcapImpl);
HWY_EXPORT(SoftmaxImpl);
HWY_EXPORT(ConvertRowImpl);
HWY_EXPORT(StreamSumImpl);
HWY_EXPORT(ArgmaxImpl);

void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps, float* out) {
  if (n_rows <= 0 || n <= 0) return;
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, weight, n_rows, n, eps, out);
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  if (n <= 0) return;
  HWY_DYNAMIC_DISPATCH(SwigluImpl)(gate, up, n, out);
}

void conv_silu(const float* x, const float* w, int64_t n, int64_t channels, int taps, float* y) {
  if (n <= 0 || channels <= 0) return;
  HWY_DYNAMIC_DISPATCH(ConvSiluImpl)(x, w, n, channels, taps, y);
}

void geglu(const float* gate, const float* up, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(GegluImpl)(gate, up, n, out);
}

void gelu_tanh(float* x, int64_t n) {
  if (n <= 0) return;
  HWY_DYNAMIC_DISPATCH(GeluTanhImpl)(x, n);
}

void softcap(float* x, int64_t n, float cap) { HWY_DYNAMIC_DISPATCH(SoftcapImpl)(x, n, cap); }

void softmax(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(SoftmaxImpl)(x, n); }

int32_t argmax(const float* x, int64_t n) {
  return n <= 0 ? 0 : static_cast<int32_t>(HWY_DYNAMIC_DISPATCH(ArgmaxImpl)(x, n));
}

void convert_row(DType dtype, const void* src, int64_t n, float* dst) {
  if (n <= 0) return;
  if (is_quantized(dtype)) {
    const WeightFormat* format = weight_format(dtype);
    if (!format->dequantize)
      fail(ErrorKind::kInternal, "convert_row: {} rows are interleaved (use matrix_row)", dtype_name(dtype));
    return format->dequantize(static_cast<const uint8_t*>(src), n, dst);
  }
  HWY_DYNAMIC_DISPATCH(ConvertRowImpl)(dtype, src, n, dst);
}

void matrix_row(const WeightMatrix& m, int64_t row, float* out) {
  if (row < 0 || row >= m.rows) fail(ErrorKind::kInternal, "matrix_row: row {} of a {}-row matrix", row, m.rows);
  if (is_quantized(m.dtype))
    if (const WeightFormat* format = weight_format(m.dtype); format->dequantize_row)
      return format->dequantize_row(static_cast<const uint8_t*>(m.data), m.cols, row, out);
  convert_row(m.dtype, static_cast<const uint8_t*>(m.data) + dtype_row_bytes(m.dtype, m.cols) * size_t(row), m.cols,
              out);
}

float stream_sum(const float* data, int64_t n) { return HWY_DYNAMIC_DISPATCH(StreamSumImpl)(data, n); }

// RoPE is a handful of multiplies per element; the angles (computed in double) dominate.
// Every layer of a forward rotates q and k at the same positions, so the last two tables
// computed on this thread are kept and reused when positions and frequencies match (two:
// Gemma 4 alternates local and global frequencies). The 2 × layers calls of a forward then
// compute them once; the sines and cosines had been ~3 % of a decode step, on the calling
// thread alone.
const float* rope_angles(const int32_t* positions, int64_t n_rows, const float* inv_freq, int64_t half) {
  struct Table {
    std::vector<int32_t> positions;
    std::vector<float> inv_freq;
    std::vector<float> cos_sin;  // [n_rows][half][2]
    bool matches(const int32_t* p, int64_t n, const float* f, int64_t h) const {
      return positions.size() == size_t(n) && inv_freq.size() == size_t(h) &&
             std::equal(p, p + n, positions.begin()) && std::equal(f, f + h, inv_freq.begin());
    }
  };
  thread_local Table tables[2];
  thread_local int newest = 0;
  for (int i : {newest, 1 - newest})
    if (tables[i].matches(positions, n_rows, inv_freq, half)) {
      newest = i;
      return tables[i].cos_sin.data();
    }
  newest = 1 - newest;  // replaces the older table
  Table& t = tables[newest];
  t.positions.assign(positions, positions + n_rows);
  t.inv_freq.assign(inv_freq, inv_freq + half);
  t.cos_sin.resize(size_t(n_rows * half * 2));
  float* cos_sin = t.cos_sin.data();
  auto rows = [&](size_t begin, size_t end, int) {
    for (size_t r = begin; r < end; ++r)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[r]) * static_cast<double>(inv_freq[i]);
        cos_sin[(r * half + i) * 2] = static_cast<float>(std::cos(angle));
        cos_sin[(r * half + i) * 2 + 1] = static_cast<float>(std::sin(angle));
      }
  };
  if (n_rows * half < 16 * 1024) {
    rows(0, static_cast<size_t>(n_rows), 0);
  } else {
    parallel_for(static_cast<size_t>(n_rows), rows);
  }
  return cos_sin;
}

void rope(float* x, int64_t n_rows, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* inv_freq) {
  const int64_t half = head_dim / 2;
  const float* cos_sin = rope_angles(positions, n_rows, inv_freq, half);
  auto rows = [&](size_t begin, size_t end, int) {
    std::vector<float> cos_v(half), sin_v(half);
    for (size_t r = begin; r < end; ++r) {
      for (int64_t i = 0; i < half; ++i) {
        cos_v[i] = cos_sin[(r * half + i) * 2];
        sin_v[i] = cos_sin[(r * half + i) * 2 + 1];
      }
      float* row = x + r * n_heads * head_dim;
      for (int64_t h = 0; h < n_heads; ++h) {
        float* a = row + h * head_dim;
        float* b = a + half;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = a[i], x2 = b[i];
          a[i] = x1 * cos_v[i] - x2 * sin_v[i];
          b[i] = x2 * cos_v[i] + x1 * sin_v[i];
        }
      }
    }
  };
  if (n_rows * n_heads * head_dim < 32 * 1024 || n_rows == 1) {
    rows(0, static_cast<size_t>(n_rows), 0);
  } else {
    parallel_for(static_cast<size_t>(n_rows), rows);
  }
}

}  // namespace nextn
#endif  // HWY_ONCE
