// kv/online_softmax-inl.h — the online-softmax step every attention path shares (full
// precision one query or four at a time, and compressed KV), so that they all round
// alike: a score's weight never depends on which path, block or vector lane it went
// through. Included inside HWY_NAMESPACE by the kernels of attention_simd.cc and
// kv_kernels.cc (Highway's per-target include guard below).
#if defined(NEXTN_KV_ONLINE_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NEXTN_KV_ONLINE_SOFTMAX_INL_H_
#undef NEXTN_KV_ONLINE_SOFTMAX_INL_H_
#else
#define NEXTN_KV_ONLINE_SOFTMAX_INL_H_
#endif

#include <cmath>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace softmax_detail {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Exponents below this are clamped to it: e^-87 (about 1.6e-38) is near the smallest
// normal float, below which the vector Exp is not accurate; such weights are noise.
inline constexpr float kMinExponent = -87.0f;
}  // namespace softmax_detail

// x[i] = e^(x[i] - m) for i < n; returns their sum. Elements past the last full vector
// go through the same vector Exp one lane at a time, so every element rounds the same.
HWY_INLINE float ExpShiftSum(float* x, int n, float m) {
  namespace hn = hwy::HWY_NAMESPACE;
  using softmax_detail::kMinExponent;
  const softmax_detail::DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const softmax_detail::VF vm = hn::Set(df, m), lo = hn::Set(df, kMinExponent);
  softmax_detail::VF sum = hn::Zero(df);
  int i = 0;
  for (; i + lanes <= n; i += lanes) {
    const softmax_detail::VF e = hn::Exp(df, hn::Max(hn::Sub(hn::LoadU(df, x + i), vm), lo));
    hn::StoreU(e, df, x + i);
    sum = hn::Add(sum, e);
  }
  float s = hn::GetLane(hn::SumOfLanes(df, sum));
  for (; i < n; ++i) {
    const float e = hn::GetLane(hn::Exp(df, hn::Set(df, x[i] - m < kMinExponent ? kMinExponent : x[i] - m)));
    x[i] = e;
    s += e;
  }
  return s;
}

// Absorbs n > 0 scores of one query into its running max m and sum l; the scores become
// their weights e^(score - m). Returns the factor the output accumulated so far must be
// scaled by: e^(m_old - m_new), exactly 1 when the max did not grow, 0 on the first
// block (m = -inf).
HWY_INLINE float OnlineSoftmaxBlock(float* scores, int n, float& m, float& l) {
  float block_max = scores[0];
  for (int t = 1; t < n; ++t) block_max = scores[t] > block_max ? scores[t] : block_max;
  float correction = 1.0f;
  if (block_max > m) {
    correction = std::isinf(m) ? 0.0f : std::exp(m - block_max);
    l *= correction;
    m = block_max;
  }
  l += ExpShiftSum(scores, n, m);
  return correction;
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#endif  // NEXTN_KV_ONLINE_SOFTMAX_INL_H_
