// kv/attention_simd.cc — Highway kernels behind kv/attention_simd.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/attention_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kv/online_softmax-inl.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kv/attention_simd.h"
#include "kv/f16_store.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

void KvLoadF32(DType dtype, const void* src, size_t n, float* dst) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
  } else if (dtype == DType::kF16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto* s = static_cast<const hwy::float16_t*>(src);
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, s + i)), df, dst + i);
    const auto* bits = static_cast<const uint16_t*>(src);
    for (; i < n; ++i) dst[i] = f16_to_f32(bits[i]);
  } else {
    const hn::Rebind<uint16_t, DF> d16;
    const hn::Rebind<uint32_t, DF> d32;
    const auto* s = static_cast<const uint16_t*>(src);
    for (; i + lanes <= n; i += lanes) {
      const auto wide = hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, s + i)));
      hn::StoreU(hn::BitCast(df, wide), df, dst + i);
    }
    for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
  }
}

void KvStore(DType dtype, const float* src, size_t n, void* dst) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  auto* d = static_cast<uint16_t*>(dst);
  if (dtype == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
    return;
  }
  size_t i = 0;
#if NEXTN_F16_DEMOTE_ROUNDS
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t lanes = hn::Lanes(df);
  auto* h = static_cast<hwy::float16_t*>(dst);
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, src + i)), dh, h + i);
#endif
  for (; i < n; ++i) d[i] = f32_to_f16(src[i]);
}

inline float Dot(const float* a, const float* b, int n) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  VF acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  int i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    acc0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc0);
    acc1 = hn::MulAdd(hn::LoadU(df, a + i + lanes), hn::LoadU(df, b + i + lanes), acc1);
  }
  for (; i + lanes <= n; i += lanes) acc0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc0);
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// scores[t] = scale * <q, k_t> for t < count; four keys at a time share each load of q.
inline void Scores(const float* q, const float* k, int count, int D, float scale, float* scores) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const int vec_end = D / lanes * lanes;
  int t = 0;
  for (; t + 4 <= count; t += 4) {
    const float* k0 = k + size_t(t) * D;
    const float* k1 = k0 + D;
    const float* k2 = k1 + D;
    const float* k3 = k2 + D;
    VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    for (int i = 0; i < vec_end; i += lanes) {
      const VF qv = hn::LoadU(df, q + i);
      a0 = hn::MulAdd(qv, hn::LoadU(df, k0 + i), a0);
      a1 = hn::MulAdd(qv, hn::LoadU(df, k1 + i), a1);
      a2 = hn::MulAdd(qv, hn::LoadU(df, k2 + i), a2);
      a3 = hn::MulAdd(qv, hn::LoadU(df, k3 + i), a3);
    }
    float s0 = hn::GetLane(hn::SumOfLanes(df, a0)), s1 = hn::GetLane(hn::SumOfLanes(df, a1));
    float s2 = hn::GetLane(hn::SumOfLanes(df, a2)), s3 = hn::GetLane(hn::SumOfLanes(df, a3));
    for (int i = vec_end; i < D; ++i) {
      s0 += q[i] * k0[i];
      s1 += q[i] * k1[i];
      s2 += q[i] * k2[i];
      s3 += q[i] * k3[i];
    }
    scores[t] = s0 * scale;
    scores[t + 1] = s1 * scale;
    scores[t + 2] = s2 * scale;
    scores[t + 3] = s3 * scale;
  }
  for (; t < count; ++t) scores[t] = Dot(q, k + size_t(t) * D, D) * scale;
}

void AttendBlock(const float* q, const float* k, const float* v, int count, int head_dim, float scale,
                 float* scores, float* m, float* l, float* acc) {
  if (count <= 0) return;
  const int D = head_dim;
  Scores(q, k, count, D, scale, scores);
  // Rescale what was accumulated under the old max by `correction`.
  const float correction = OnlineSoftmaxBlock(scores, count, *m, *l);
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  // acc = acc * correction + sum_t p_t v_t; one slice of head_dim at a time stays in
  // registers across all tokens (two chains to hide the FMA latency).
  const int vec_end = D / lanes * lanes;
  for (int i = 0; i < vec_end; i += lanes) {
    VF a0 = hn::Mul(hn::LoadU(df, acc + i), hn::Set(df, correction));
    VF a1 = hn::Zero(df);
    int u = 0;
    for (; u + 2 <= count; u += 2) {
      a0 = hn::MulAdd(hn::Set(df, scores[u]), hn::LoadU(df, v + size_t(u) * D + i), a0);
      a1 = hn::MulAdd(hn::Set(df, scores[u + 1]), hn::LoadU(df, v + size_t(u + 1) * D + i), a1);
    }
    if (u < count) a0 = hn::MulAdd(hn::Set(df, scores[u]), hn::LoadU(df, v + size_t(u) * D + i), a0);
    hn::StoreU(hn::Add(a0, a1), df, acc + i);
  }
  for (int i = vec_end; i < D; ++i) {
    float a = acc[i] * correction;
    for (int u = 0; u < count; ++u) a += scores[u] * v[size_t(u) * D + i];
    acc[i] = a;
  }
}

// Up to four queries against one block whose keys are stored transposed (kt[d * stride + t],
// stride a multiple of the vector length, zero padded): no horizontal sums, and every key
// and value load is shared by the queries. Query j sees keys [0, visible[j]).
void AttendGroup4(const float* const* qs, int nq, const float* kt, int stride, const float* v, int count, int D,
                  float scale, const int* visible, float* scores, float* m, float* l, float* const* accs) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const float* q0 = qs[0];
  const float* q1 = qs[nq > 1 ? 1 : 0];
  const float* q2 = qs[nq > 2 ? 2 : 0];
  const float* q3 = qs[nq > 3 ? 3 : 0];
  int max_visible = 0;
  for (int j = 0; j < nq; ++j) max_visible = visible[j] > max_visible ? visible[j] : max_visible;
  if (max_visible <= 0) return;
  const VF vscale = hn::Set(df, scale);
  for (int t = 0; t < max_visible; t += lanes) {
    VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    const float* col = kt + t;
    for (int d = 0; d < D; ++d) {
      const VF kv = hn::LoadU(df, col + size_t(d) * stride);
      a0 = hn::MulAdd(hn::Set(df, q0[d]), kv, a0);
      a1 = hn::MulAdd(hn::Set(df, q1[d]), kv, a1);
      a2 = hn::MulAdd(hn::Set(df, q2[d]), kv, a2);
      a3 = hn::MulAdd(hn::Set(df, q3[d]), kv, a3);
    }
    hn::StoreU(hn::Mul(a0, vscale), df, scores + t);
    hn::StoreU(hn::Mul(a1, vscale), df, scores + stride + t);
    hn::StoreU(hn::Mul(a2, vscale), df, scores + 2 * stride + t);
    hn::StoreU(hn::Mul(a3, vscale), df, scores + 3 * stride + t);
  }
  // Online softmax per query; keys past a query's visible range get weight 0.
  float correction[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  for (int j = 0; j < 4; ++j) {
    float* s = scores + size_t(j) * stride;
    const int vis = j < nq ? visible[j] : 0;
    if (vis <= 0) {
      for (int t = 0; t < max_visible; ++t) s[t] = 0.0f;
      continue;
    }
    correction[j] = OnlineSoftmaxBlock(s, vis, m[j], l[j]);
    for (int t = vis; t < max_visible; ++t) s[t] = 0.0f;
  }
  // acc_j = acc_j * correction_j + sum_t p_jt v_t, one slice of head_dim at a time.
  const float* p0 = scores;
  const float* p1 = scores + stride;
  const float* p2 = scores + 2 * stride;
  const float* p3 = scores + 3 * stride;
  const int vec_end = D / lanes * lanes;
  for (int i = 0; i < vec_end; i += lanes) {
    VF c0 = hn::Mul(hn::LoadU(df, accs[0] + i), hn::Set(df, correction[0]));
    VF c1 = nq > 1 ? hn::Mul(hn::LoadU(df, accs[1] + i), hn::Set(df, correction[1])) : hn::Zero(df);
    VF c2 = nq > 2 ? hn::Mul(hn::LoadU(df, accs[2] + i), hn::Set(df, correction[2])) : hn::Zero(df);
    VF c3 = nq > 3 ? hn::Mul(hn::LoadU(df, accs[3] + i), hn::Set(df, correction[3])) : hn::Zero(df);
    for (int t = 0; t < max_visible; ++t) {
      const VF vv = hn::LoadU(df, v + size_t(t) * D + i);
      c0 = hn::MulAdd(hn::Set(df, p0[t]), vv, c0);
      c1 = hn::MulAdd(hn::Set(df, p1[t]), vv, c1);
      c2 = hn::MulAdd(hn::Set(df, p2[t]), vv, c2);
      c3 = hn::MulAdd(hn::Set(df, p3[t]), vv, c3);
    }
    hn::StoreU(c0, df, accs[0] + i);
    if (nq > 1) hn::StoreU(c1, df, accs[1] + i);
    if (nq > 2) hn::StoreU(c2, df, accs[2] + i);
    if (nq > 3) hn::StoreU(c3, df, accs[3] + i);
  }
  for (int j = 0; j < nq; ++j) {
    const float* p = scores + size_t(j) * stride;
    for (int i = vec_end; i < D; ++i) {
      float a = accs[j][i] * correction[j];
      for (int t = 0; t < max_visible; ++t) a += p[t] * v[size_t(t) * D + i];
      accs[j][i] = a;
    }
  }
}

size_t Lanes() { return hn::Lanes(DF()); }

void AttendBlockMulti(const float* const* qs, int nq, const float* kt, int stride, const float* v, int count, int D,
                      float scale, const int* visible, float* scores, float* m, float* l, float* const* accs) {
  for (int j = 0; j < nq; j += 4) {
    const int n = nq - j < 4 ? nq - j : 4;
    AttendGroup4(qs + j, n, kt, stride, v, count, D, scale, visible + j, scores, m + j, l + j, accs + j);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(KvLoadF32);
HWY_EXPORT(KvStore);
HWY_EXPORT(AttendBlock);
HWY_EXPORT(AttendBlockMulti);
HWY_EXPORT(Lanes);

void kv_load_f32(DType dtype, const void* src, size_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(KvLoadF32)(dtype, src, n, dst);
}
void kv_store(DType dtype, const float* src, size_t n, void* dst) { HWY_DYNAMIC_DISPATCH(KvStore)(dtype, src, n, dst); }
void attend_block(const float* q, const float* k, const float* v, int count, int head_dim, float scale,
                  float* scores, float* m, float* l, float* acc) {
  HWY_DYNAMIC_DISPATCH(AttendBlock)(q, k, v, count, head_dim, scale, scores, m, l, acc);
}

void attend_block_multi(const float* const* qs, int nq, const float* kt, int stride, const float* v, int count,
                        int head_dim, float scale, const int* visible, float* scores, float* m, float* l,
                        float* const* accs) {
  HWY_DYNAMIC_DISPATCH(AttendBlockMulti)(qs, nq, kt, stride, v, count, head_dim, scale, visible, scores, m, l, accs);
}
size_t attention_lanes() { return HWY_DYNAMIC_DISPATCH(Lanes)(); }

}  // namespace nextn
#endif  // HWY_ONCE
