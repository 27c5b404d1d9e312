// model/delta_rule.cc — Highway kernels behind model/delta_rule.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "model/delta_rule.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "model/delta_rule.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void DeltaRuleStep(const float* s_in, float* s_out, const float* q, const float* k, const float* v, float alpha,
                   float beta, int dk, int dv, float* o) {
  const hn::ScalableTag<float> df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const int vec_end = dv - dv % lanes;
  // m = S_inᵀ k, accumulated into o (used as scratch), then δ = β (v − α m) in place.
  for (int j = 0; j < vec_end; j += lanes) hn::StoreU(hn::Zero(df), df, o + j);
  for (int j = vec_end; j < dv; ++j) o[j] = 0.0f;
  for (int i = 0; i < dk; ++i) {
    const float* row = s_in + static_cast<size_t>(i) * dv;
    const auto ki = hn::Set(df, k[i]);
    for (int j = 0; j < vec_end; j += lanes) hn::StoreU(hn::MulAdd(hn::LoadU(df, row + j), ki, hn::LoadU(df, o + j)), df, o + j);
    for (int j = vec_end; j < dv; ++j) o[j] += row[j] * k[i];
  }
  // δ kept in o until the second pass consumes it; the output accumulates in acc.
  HWY_ALIGN float delta_buf[512];
  float* delta = delta_buf;
  for (int j = 0; j < dv; ++j) delta[j] = beta * (v[j] - alpha * o[j]);
  for (int j = 0; j < dv; ++j) o[j] = 0.0f;
  const auto va = hn::Set(df, alpha);
  for (int i = 0; i < dk; ++i) {
    const float* in = s_in + static_cast<size_t>(i) * dv;
    float* out = s_out + static_cast<size_t>(i) * dv;
    const auto ki = hn::Set(df, k[i]);
    const auto qi = hn::Set(df, q[i]);
    for (int j = 0; j < vec_end; j += lanes) {
      const auto s = hn::MulAdd(ki, hn::LoadU(df, delta + j), hn::Mul(va, hn::LoadU(df, in + j)));
      hn::StoreU(s, df, out + j);
      hn::StoreU(hn::MulAdd(s, qi, hn::LoadU(df, o + j)), df, o + j);
    }
    for (int j = vec_end; j < dv; ++j) {
      const float s = k[i] * delta[j] + alpha * in[j];
      out[j] = s;
      o[j] += s * q[i];
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(DeltaRuleStep);

void delta_rule_step(const float* s_in, float* s_out, const float* q, const float* k, const float* v, float alpha,
                     float beta, int dk, int dv, float* o) {
  HWY_DYNAMIC_DISPATCH(DeltaRuleStep)(s_in, s_out, q, k, v, alpha, beta, dk, dv, o);
}

}  // namespace nextn
#endif  // HWY_ONCE
