// model/delta_rule.cc — Highway kernels behind model/delta_rule.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "model/delta_rule.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>

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
  // m = S_inᵀ k, then δ = β (v − α m); the output accumulates in o (when asked for).
  HWY_ALIGN float m[512];
  HWY_ALIGN float delta[512];
  for (int j = 0; j < vec_end; j += lanes) hn::Store(hn::Zero(df), df, m + j);
  for (int j = vec_end; j < dv; ++j) m[j] = 0.0f;
  for (int i = 0; i < dk; ++i) {
    const float* row = s_in + static_cast<size_t>(i) * dv;
    const auto ki = hn::Set(df, k[i]);
    for (int j = 0; j < vec_end; j += lanes) hn::Store(hn::MulAdd(hn::LoadU(df, row + j), ki, hn::Load(df, m + j)), df, m + j);
    for (int j = vec_end; j < dv; ++j) m[j] += row[j] * k[i];
  }
  for (int j = 0; j < dv; ++j) delta[j] = beta * (v[j] - alpha * m[j]);
  const auto va = hn::Set(df, alpha);
  if (q == nullptr) {  // the state only (re-applying a logged row)
    for (int i = 0; i < dk; ++i) {
      const float* in = s_in + static_cast<size_t>(i) * dv;
      float* out = s_out + static_cast<size_t>(i) * dv;
      const auto ki = hn::Set(df, k[i]);
      for (int j = 0; j < vec_end; j += lanes)
        hn::StoreU(hn::MulAdd(ki, hn::Load(df, delta + j), hn::Mul(va, hn::LoadU(df, in + j))), df, out + j);
      for (int j = vec_end; j < dv; ++j) out[j] = k[i] * delta[j] + alpha * in[j];
    }
    return;
  }
  for (int j = 0; j < dv; ++j) o[j] = 0.0f;
  for (int i = 0; i < dk; ++i) {
    const float* in = s_in + static_cast<size_t>(i) * dv;
    float* out = s_out + static_cast<size_t>(i) * dv;
    const auto ki = hn::Set(df, k[i]);
    const auto qi = hn::Set(df, q[i]);
    for (int j = 0; j < vec_end; j += lanes) {
      const auto s = hn::MulAdd(ki, hn::Load(df, delta + j), hn::Mul(va, hn::LoadU(df, in + j)));
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

using DF = hn::ScalableTag<float>;

// y += a·x over n floats.
HWY_INLINE void Axpy(float a, const float* HWY_RESTRICT x, float* HWY_RESTRICT y, int n) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const auto va = hn::Set(df, a);
  int i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::MulAdd(va, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

// y = a·x over n floats.
HWY_INLINE void Scaled(float a, const float* x, float* y, int n) {  // y may be x
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const auto va = hn::Set(df, a);
  int i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(va, hn::LoadU(df, x + i)), df, y + i);
  for (; i < n; ++i) y[i] = a * x[i];
}

// Σ a_i b_i over n floats.
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int n) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  auto acc = hn::Zero(df);
  int i = 0;
  for (; i + lanes <= n; i += lanes) acc = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc);
  float sum = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// The chunked rule of delta_rule.h; every inner loop over dk or dv is a vector loop.
// Scratch: gamma and tail [C], L and qk [C, C], U and Vp [C, dv], Wk [C, dk].
void ChunkedDeltaRule(float* S, const float* q, const float* k, const float* v, size_t qs, const float* beta,
                      const float* g, size_t gs, int n, int C, int dk, int dv, float* o, size_t os, float* gamma,
                      float* tail, float* L, float* qk, float* U, float* Wk, float* Vp) {
  const size_t cc = static_cast<size_t>(C);
  for (int c0 = 0; c0 < n; c0 += C) {
    const int c = std::min(C, n - c0);
    float acc = 0.0f;
    for (int i = 0; i < c; ++i) gamma[i] = (acc += g[static_cast<size_t>(c0 + i) * gs]);
    auto K = [&](int i) { return k + static_cast<size_t>(c0 + i) * qs; };
    auto Q = [&](int i) { return q + static_cast<size_t>(c0 + i) * qs; };
    auto B = [&](int i) { return beta[static_cast<size_t>(c0 + i) * gs]; };
    // L (strict lower) and the q·k decay products (lower incl. diagonal).
    for (int i = 0; i < c; ++i)
      for (int j = 0; j <= i; ++j) {
        const float decay = std::exp(gamma[i] - gamma[j]);
        L[i * cc + j] = j < i ? B(i) * Dot(K(i), K(j), dk) * decay : 0.0f;
        qk[i * cc + j] = Dot(Q(i), K(j), dk) * decay;
      }
    // Forward substitution: U_i = β_i v_i − Σ_{j<i} L_ij U_j, W_i = β_i e^{γ_i} k_i − Σ_{j<i} L_ij W_j.
    for (int i = 0; i < c; ++i) {
      float* u = U + static_cast<size_t>(i) * dv;
      float* w = Wk + static_cast<size_t>(i) * dk;
      Scaled(B(i), v + static_cast<size_t>(c0 + i) * qs, u, dv);
      Scaled(B(i) * std::exp(gamma[i]), K(i), w, dk);
      for (int j = 0; j < i; ++j) {
        const float l = L[i * cc + j];
        Axpy(-l, U + static_cast<size_t>(j) * dv, u, dv);
        Axpy(-l, Wk + static_cast<size_t>(j) * dk, w, dk);
      }
    }
    // V' = U − W S and O_i = e^{γ_i} q_i S + Σ_{j≤i} qk_ij V'_j.
    for (int i = 0; i < c; ++i) {
      float* vp = Vp + static_cast<size_t>(i) * dv;
      float* out = o + static_cast<size_t>(c0 + i) * os;
      std::copy_n(U + static_cast<size_t>(i) * dv, dv, vp);
      std::fill_n(out, dv, 0.0f);
      const float* w = Wk + static_cast<size_t>(i) * dk;
      const float eg = std::exp(gamma[i]);
      const float* qi = Q(i);
      for (int d = 0; d < dk; ++d) {
        const float* srow = S + static_cast<size_t>(d) * dv;
        Axpy(-w[d], srow, vp, dv);
        Axpy(eg * qi[d], srow, out, dv);
      }
      for (int j = 0; j <= i; ++j) Axpy(qk[i * cc + j], Vp + static_cast<size_t>(j) * dv, out, dv);
    }
    // S ← e^{γ_last} S + Σ_j e^{γ_last − γ_j} k_j V'_jᵀ.
    const float last = gamma[c - 1];
    for (int j = 0; j < c; ++j) tail[j] = std::exp(last - gamma[j]);
    const float el = std::exp(last);
    for (int d = 0; d < dk; ++d) {
      float* srow = S + static_cast<size_t>(d) * dv;
      Scaled(el, srow, srow, dv);
      for (int j = 0; j < c; ++j) Axpy(tail[j] * K(j)[d], Vp + static_cast<size_t>(j) * dv, srow, dv);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(DeltaRuleStep);
HWY_EXPORT(ChunkedDeltaRule);

void delta_rule_step(const float* s_in, float* s_out, const float* q, const float* k, const float* v, float alpha,
                     float beta, int dk, int dv, float* o) {
  HWY_DYNAMIC_DISPATCH(DeltaRuleStep)(s_in, s_out, q, k, v, alpha, beta, dk, dv, o);
}

void chunked_delta_rule(float* S, const float* q, const float* k, const float* v, size_t qs, const float* beta,
                        const float* g, size_t gs, int n, int chunk, int dk, int dv, float* o, size_t os,
                        DeltaChunkScratch& scratch) {
  const size_t c = static_cast<size_t>(chunk);
  scratch.gamma.resize(c);
  scratch.tail.resize(c);
  scratch.L.resize(c * c);
  scratch.qk.resize(c * c);
  scratch.U.resize(c * static_cast<size_t>(dv));
  scratch.Vp.resize(c * static_cast<size_t>(dv));
  scratch.Wk.resize(c * static_cast<size_t>(dk));
  HWY_DYNAMIC_DISPATCH(ChunkedDeltaRule)(S, q, k, v, qs, beta, g, gs, n, chunk, dk, dv, o, os, scratch.gamma.data(),
                                         scratch.tail.data(), scratch.L.data(), scratch.qk.data(), scratch.U.data(),
                                         scratch.Wk.data(), scratch.Vp.data());
}

}  // namespace nextn
#endif  // HWY_ONCE
