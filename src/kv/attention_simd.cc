// kv/attention_simd.cc — Highway kernels behind kv/attention_simd.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/attention_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kv/attention_simd.h"

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
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  auto* h = static_cast<hwy::float16_t*>(dst);
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, src + i)), dh, h + i);
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
  float block_max = scores[0];
  for (int t = 1; t < count; ++t) block_max = scores[t] > block_max ? scores[t] : block_max;
  const float m_new = block_max > *m ? block_max : *m;
  // Rescale what was accumulated under the old max (e^-inf = 0 on the first block).
  const float correction = std::exp(*m - m_new);
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const VF vmax = hn::Set(df, m_new);
  VF vsum = hn::Zero(df);
  int t = 0;
  for (; t + lanes <= count; t += lanes) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, scores + t), vmax));
    hn::StoreU(e, df, scores + t);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, vsum));
  for (; t < count; ++t) {
    scores[t] = std::exp(scores[t] - m_new);
    sum += scores[t];
  }
  *l = *l * correction + sum;
  *m = m_new;
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

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(KvLoadF32);
HWY_EXPORT(KvStore);
HWY_EXPORT(AttendBlock);

void kv_load_f32(DType dtype, const void* src, size_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(KvLoadF32)(dtype, src, n, dst);
}
void kv_store(DType dtype, const float* src, size_t n, void* dst) { HWY_DYNAMIC_DISPATCH(KvStore)(dtype, src, n, dst); }
void attend_block(const float* q, const float* k, const float* v, int count, int head_dim, float scale,
                  float* scores, float* m, float* l, float* acc) {
  HWY_DYNAMIC_DISPATCH(AttendBlock)(q, k, v, count, head_dim, scale, scores, m, l, acc);
}

}  // namespace nextn
#endif  // HWY_ONCE
