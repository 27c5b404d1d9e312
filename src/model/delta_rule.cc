// model/delta_rule.cc — Highway kernels behind model/delta_rule.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "model/delta_rule.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/delta_rule.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// One row of the rule on columns [j0, j0 + NV·lanes): src and dst point at the block's
// first column, key index i at src + i·src_stride (dst likewise; dst may be src). The
// rule is separate per column j of S (m_j, δ_j, S[:, j] and o_j read column j only), and
// every sum over the key index i runs in order i = 0..dk−1, one chain per vector.
template <int NV>
HWY_INLINE void RowOnColumns(const DeltaRow& row, const float* src, size_t src_stride, float* dst, size_t dst_stride,
                             int dk, int j0) {
  // The loops over the NV vectors are unrolled so that acc and out stay in registers
  // (left to the compiler they lived on the stack, a load and a store per multiply-add).
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  hn::Vec<DF> acc[NV];
#pragma GCC unroll 4
  for (int b = 0; b < NV; ++b) acc[b] = hn::Zero(df);
  for (int i = 0; i < dk; ++i) {
    const auto ki = hn::Set(df, row.k[i]);
    const float* s = src + static_cast<size_t>(i) * src_stride;
#pragma GCC unroll 4
    for (int b = 0; b < NV; ++b) acc[b] = hn::MulAdd(hn::LoadU(df, s + b * lanes), ki, acc[b]);
  }
  // δ = β (v − α m), kept in acc.
  const auto va = hn::Set(df, row.alpha), vb = hn::Set(df, row.beta);
#pragma GCC unroll 4
  for (int b = 0; b < NV; ++b)
    acc[b] = hn::Mul(vb, hn::Sub(hn::LoadU(df, row.v + j0 + b * lanes), hn::Mul(va, acc[b])));
  if (!row.q) {  // state only (a re-applied row)
    for (int i = 0; i < dk; ++i) {
      const auto ki = hn::Set(df, row.k[i]);
      const float* s = src + static_cast<size_t>(i) * src_stride;
      float* d = dst + static_cast<size_t>(i) * dst_stride;
#pragma GCC unroll 4
      for (int b = 0; b < NV; ++b)
        hn::StoreU(hn::MulAdd(ki, acc[b], hn::Mul(va, hn::LoadU(df, s + b * lanes))), df, d + b * lanes);
    }
    return;
  }
  hn::Vec<DF> out[NV];
#pragma GCC unroll 4
  for (int b = 0; b < NV; ++b) out[b] = hn::Zero(df);
  for (int i = 0; i < dk; ++i) {
    const auto ki = hn::Set(df, row.k[i]), qi = hn::Set(df, row.q[i]);
    const float* s = src + static_cast<size_t>(i) * src_stride;
    float* d = dst + static_cast<size_t>(i) * dst_stride;
#pragma GCC unroll 4
    for (int b = 0; b < NV; ++b) {
      const auto x = hn::MulAdd(ki, acc[b], hn::Mul(va, hn::LoadU(df, s + b * lanes)));
      hn::StoreU(x, df, d + b * lanes);
      out[b] = hn::MulAdd(x, qi, out[b]);
    }
  }
  if (row.o)
#pragma GCC unroll 4
    for (int b = 0; b < NV; ++b) hn::StoreU(out[b], df, row.o + j0 + b * lanes);
}

// The same for one column j (the columns past the last whole vector).
HWY_INLINE void RowOnColumn(const DeltaRow& row, const float* src, size_t src_stride, float* dst, size_t dst_stride,
                            int dk, int j) {
  float m = 0.0f;
  for (int i = 0; i < dk; ++i) m = std::fma(src[static_cast<size_t>(i) * src_stride], row.k[i], m);
  const float delta = row.beta * (row.v[j] - row.alpha * m);
  float out = 0.0f;
  for (int i = 0; i < dk; ++i) {
    const float x = std::fma(row.k[i], delta, row.alpha * src[static_cast<size_t>(i) * src_stride]);
    dst[static_cast<size_t>(i) * dst_stride] = x;
    if (row.q) out = std::fma(x, row.q[i], out);
  }
  if (row.o) row.o[j] = out;
}

// Every row over columns [j0, j0 + width) (NV vectors; NV = 0: one column): rows
// [0, n_mid) leave their state in s_mid, the rest in s_out (null: dropped). Between rows
// the block lives in `scratch`, its rows `width` floats apart: in the planes a key row is
// dv floats apart, and at dv = 128 the block's lines (4 of every 8 sets' worth) fold onto
// half of L1's sets, more lines per set than L1 has ways, so a block read there between
// rows came from L2 every time. Only the first row reads a plane, and only the last row
// of each part writes one.
template <int NV>
HWY_INLINE void RowsOnBlock(const float* s_in, float* s_mid, int n_mid, float* s_out, float* scratch,
                            const DeltaRow* rows, int n, int dk, int dv, int j0, int width) {
  const float* src = s_in + j0;
  size_t src_stride = size_t(dv);
  for (int t = 0; t < n; ++t) {
    float* dst = scratch;
    size_t dst_stride = size_t(width);
    if (t == n_mid - 1) {
      dst = s_mid + j0, dst_stride = size_t(dv);
    } else if (t == n - 1 && s_out) {
      dst = s_out + j0, dst_stride = size_t(dv);
    }
    if constexpr (NV > 0) {
      RowOnColumns<NV>(rows[t], src, src_stride, dst, dst_stride, dk, j0);
    } else {
      RowOnColumn(rows[t], src, src_stride, dst, dst_stride, dk, j0);
    }
    src = dst, src_stride = dst_stride;
  }
}

void DeltaRuleRows(const float* s_in, float* s_mid, int n_mid, float* s_out, const DeltaRow* rows, int n, int dk,
                   int dv) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  thread_local std::vector<float> scratch;
  if (scratch.size() < size_t(dk) * 4 * lanes) scratch.resize(size_t(dk) * 4 * lanes);
  int j = 0;
  for (; j + 4 * lanes <= dv; j += 4 * lanes)
    RowsOnBlock<4>(s_in, s_mid, n_mid, s_out, scratch.data(), rows, n, dk, dv, j, 4 * lanes);
  for (; j + lanes <= dv; j += lanes)
    RowsOnBlock<1>(s_in, s_mid, n_mid, s_out, scratch.data(), rows, n, dk, dv, j, lanes);
  for (; j < dv; ++j) RowsOnBlock<0>(s_in, s_mid, n_mid, s_out, scratch.data(), rows, n, dk, dv, j, 1);
}

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

// C = beta·C + alpha·(A·B) for A [m, K] (row stride lda), B [K, n] (ldb), C [m, n] (ldc);
// beta 0 writes C without reading it. `lower`: A is lower triangular (zero right of the
// diagonal), so a tile of rows i0.. sums over k < i0 + its rows only. Tiles of 4 rows ×
// 2 vectors keep 8 accumulators in registers: each B vector loaded serves 4 rows, each A
// entry broadcast serves 2 vectors, so the loop is bound by the multiply-adds, not by
// loads and stores as a row-at-a-time axpy is.
void Gemm(int m, int n, int K, const float* HWY_RESTRICT A, size_t lda, const float* HWY_RESTRICT B, size_t ldb,
          float* HWY_RESTRICT C, size_t ldc, float alpha, float beta, bool lower) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const auto va = hn::Set(df, alpha), vb = hn::Set(df, beta);
  auto finish = [&](hn::Vec<DF> acc, float* c) {
    const auto r = hn::Mul(va, acc);
    hn::StoreU(beta == 0.0f ? r : hn::MulAdd(vb, hn::LoadU(df, c), r), df, c);
  };
  int i = 0;
  for (; i + 4 <= m; i += 4) {
    const int kend = lower ? std::min(K, i + 4) : K;
    const float* a0 = A + static_cast<size_t>(i) * lda;
    const float *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
    float* c0 = C + static_cast<size_t>(i) * ldc;
    float *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
    int j = 0;
    for (; j + 2 * lanes <= n; j += 2 * lanes) {
      auto s00 = hn::Zero(df), s01 = hn::Zero(df), s10 = hn::Zero(df), s11 = hn::Zero(df);
      auto s20 = hn::Zero(df), s21 = hn::Zero(df), s30 = hn::Zero(df), s31 = hn::Zero(df);
      for (int k = 0; k < kend; ++k) {
        const float* b = B + static_cast<size_t>(k) * ldb + j;
        const auto b0 = hn::LoadU(df, b), b1 = hn::LoadU(df, b + lanes);
        auto x = hn::Set(df, a0[k]);
        s00 = hn::MulAdd(x, b0, s00), s01 = hn::MulAdd(x, b1, s01);
        x = hn::Set(df, a1[k]);
        s10 = hn::MulAdd(x, b0, s10), s11 = hn::MulAdd(x, b1, s11);
        x = hn::Set(df, a2[k]);
        s20 = hn::MulAdd(x, b0, s20), s21 = hn::MulAdd(x, b1, s21);
        x = hn::Set(df, a3[k]);
        s30 = hn::MulAdd(x, b0, s30), s31 = hn::MulAdd(x, b1, s31);
      }
      finish(s00, c0 + j), finish(s01, c0 + j + lanes), finish(s10, c1 + j), finish(s11, c1 + j + lanes);
      finish(s20, c2 + j), finish(s21, c2 + j + lanes), finish(s30, c3 + j), finish(s31, c3 + j + lanes);
    }
    for (; j + lanes <= n; j += lanes) {
      auto s0 = hn::Zero(df), s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df);
      for (int k = 0; k < kend; ++k) {
        const auto b0 = hn::LoadU(df, B + static_cast<size_t>(k) * ldb + j);
        s0 = hn::MulAdd(hn::Set(df, a0[k]), b0, s0), s1 = hn::MulAdd(hn::Set(df, a1[k]), b0, s1);
        s2 = hn::MulAdd(hn::Set(df, a2[k]), b0, s2), s3 = hn::MulAdd(hn::Set(df, a3[k]), b0, s3);
      }
      finish(s0, c0 + j), finish(s1, c1 + j), finish(s2, c2 + j), finish(s3, c3 + j);
    }
    for (; j < n; ++j)
      for (int r = 0; r < 4; ++r) {
        const float* a = A + static_cast<size_t>(i + r) * lda;
        float sum = 0.0f;
        for (int k = 0; k < kend; ++k) sum += a[k] * B[static_cast<size_t>(k) * ldb + j];
        float& c = C[static_cast<size_t>(i + r) * ldc + j];
        c = alpha * sum + (beta == 0.0f ? 0.0f : beta * c);
      }
  }
  for (; i < m; ++i) {  // the last m % 4 rows, one at a time
    const int kend = lower ? std::min(K, i + 1) : K;
    const float* a = A + static_cast<size_t>(i) * lda;
    float* c = C + static_cast<size_t>(i) * ldc;
    int j = 0;
    for (; j + lanes <= n; j += lanes) {
      auto s = hn::Zero(df);
      for (int k = 0; k < kend; ++k) s = hn::MulAdd(hn::Set(df, a[k]), hn::LoadU(df, B + static_cast<size_t>(k) * ldb + j), s);
      finish(s, c + j);
    }
    for (; j < n; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < kend; ++k) sum += a[k] * B[static_cast<size_t>(k) * ldb + j];
      c[j] = alpha * sum + (beta == 0.0f ? 0.0f : beta * c[j]);
    }
  }
}

// The chunked rule of delta_rule.h as matrix products (Gemm), per chunk of c rows:
//   G = K Kᵀ, P = Q Kᵀ  →  L (strict lower, β_i e^{γ_i−γ_j} G_ij), D (lower, e^{γ_i−γ_j} P_ij)
//   T = (I + L)⁻¹ (forward substitution on c × c)
//   [U | W] = T [β⊙V | β⊙e^γ⊙K];  V' = U − W S;  O = (e^γ⊙Q) S + D V'
//   S ← e^{γ_last} S + (tail⊙K)ᵀ V'
// Scratch (delta_rule.h): gamma, tail [C]; L, D, T [C, C]; Kt [dk, C];
// Y, UW [C, dv + dk]; Qs [C, dk].
void ChunkedDeltaRule(float* S, const float* q, const float* k, const float* v, size_t qs, const float* beta,
                      const float* g, size_t gs, int n, int C, int dk, int dv, float* o, size_t os,
                      DeltaChunkScratch* sc) {
  const size_t cc = static_cast<size_t>(C), w = static_cast<size_t>(dv + dk);
  float *gamma = sc->gamma.data(), *tail = sc->tail.data(), *L = sc->L.data(), *D = sc->qk.data();
  float *T = sc->T.data(), *Kt = sc->Kt.data(), *Y = sc->Y.data(), *UW = sc->UW.data(), *Qs = sc->Qs.data();
  for (int c0 = 0; c0 < n; c0 += C) {
    const int c = std::min(C, n - c0);
    const float* Kc = k + static_cast<size_t>(c0) * qs;
    const float* Qc = q + static_cast<size_t>(c0) * qs;
    auto B = [&](int i) { return beta[static_cast<size_t>(c0 + i) * gs]; };
    float acc = 0.0f;
    for (int i = 0; i < c; ++i) gamma[i] = (acc += g[static_cast<size_t>(c0 + i) * gs]);
    for (int j = 0; j < c; ++j)
      for (int d = 0; d < dk; ++d) Kt[static_cast<size_t>(d) * cc + j] = Kc[static_cast<size_t>(j) * qs + d];
    Gemm(c, c, dk, Kc, qs, Kt, cc, L, cc, 1.0f, 0.0f, false);  // G, made L below
    Gemm(c, c, dk, Qc, qs, Kt, cc, D, cc, 1.0f, 0.0f, false);  // P, made D below
    for (int i = 0; i < c; ++i) {
      float* li = L + static_cast<size_t>(i) * cc;
      float* di = D + static_cast<size_t>(i) * cc;
      for (int j = 0; j <= i; ++j) {
        const float decay = std::exp(gamma[i] - gamma[j]);
        li[j] = j < i ? B(i) * li[j] * decay : 0.0f;
        di[j] *= decay;
      }
      std::fill(li + i + 1, li + c, 0.0f);
      std::fill(di + i + 1, di + c, 0.0f);
    }
    // T_i = e_i − Σ_{j<i} L_ij T_j (row j of T is zero beyond j).
    for (int i = 0; i < c; ++i) {
      float* ti = T + static_cast<size_t>(i) * cc;
      std::fill(ti, ti + c, 0.0f);
      ti[i] = 1.0f;
      for (int j = 0; j < i; ++j) Axpy(-L[static_cast<size_t>(i) * cc + j], T + static_cast<size_t>(j) * cc, ti, j + 1);
    }
    for (int i = 0; i < c; ++i) {
      float* y = Y + static_cast<size_t>(i) * w;
      Scaled(B(i), v + static_cast<size_t>(c0 + i) * qs, y, dv);
      Scaled(B(i) * std::exp(gamma[i]), Kc + static_cast<size_t>(i) * qs, y + dv, dk);
      Scaled(std::exp(gamma[i]), Qc + static_cast<size_t>(i) * qs, Qs + static_cast<size_t>(i) * dk, dk);
    }
    Gemm(c, static_cast<int>(w), c, T, cc, Y, w, UW, w, 1.0f, 0.0f, true);   // [U | W]
    Gemm(c, dv, dk, UW + dv, w, S, static_cast<size_t>(dv), UW, w, -1.0f, 1.0f, false);  // U becomes V'
    float* oc = o + static_cast<size_t>(c0) * os;
    Gemm(c, dv, dk, Qs, static_cast<size_t>(dk), S, static_cast<size_t>(dv), oc, os, 1.0f, 0.0f, false);
    Gemm(c, dv, c, D, cc, UW, w, oc, os, 1.0f, 1.0f, true);
    const float last = gamma[c - 1];
    for (int j = 0; j < c; ++j) tail[j] = std::exp(last - gamma[j]);
    for (int d = 0; d < dk; ++d)
      for (int j = 0; j < c; ++j) Kt[static_cast<size_t>(d) * cc + j] *= tail[j];
    Gemm(dk, dv, c, Kt, cc, UW, w, S, static_cast<size_t>(dv), 1.0f, std::exp(last), false);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#if HWY_ARCH_X86
#include <xmmintrin.h>
#endif

namespace nextn {
namespace {

// Within a chunk the decays e^{γ_i − γ_j} and e^{γ_i} fall far below 1e-38 (a decay of
// −5 per token reaches e^−320 over 64 rows), and x86 multiply-adds take a microcode
// assist for every subnormal operand: a chunk ran 8× slower. Such terms are below 1e-38
// of values of unit size, far under float32's rounding, so the chunked rule runs with
// subnormals flushed to zero (FTZ and DAZ) and gives the thread its mode back after.
class SubnormalsFlushed {
 public:
#if HWY_ARCH_X86
  SubnormalsFlushed() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~SubnormalsFlushed() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

}  // namespace

HWY_EXPORT(DeltaRuleRows);
HWY_EXPORT(ChunkedDeltaRule);

void delta_rule_rows(const float* s_in, float* s_mid, int n_mid, float* s_out, const DeltaRow* rows, int n, int dk,
                     int dv) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(DeltaRuleRows)(s_in, s_mid, n_mid, s_out, rows, n, dk, dv);
}

void chunked_delta_rule(float* S, const float* q, const float* k, const float* v, size_t qs, const float* beta,
                        const float* g, size_t gs, int n, int chunk, int dk, int dv, float* o, size_t os,
                        DeltaChunkScratch& scratch) {
  const size_t c = static_cast<size_t>(chunk), w = static_cast<size_t>(dv + dk);
  scratch.gamma.resize(c);
  scratch.tail.resize(c);
  scratch.L.resize(c * c);
  scratch.qk.resize(c * c);
  scratch.T.resize(c * c);
  scratch.Kt.resize(static_cast<size_t>(dk) * c);
  scratch.Y.resize(c * w);
  scratch.UW.resize(c * w);
  scratch.Qs.resize(c * static_cast<size_t>(dk));
  const SubnormalsFlushed flushed;
  HWY_DYNAMIC_DISPATCH(ChunkedDeltaRule)(S, q, k, v, qs, beta, g, gs, n, chunk, dk, dv, o, os, &scratch);
}

}  // namespace nextn
#endif  // HWY_ONCE
