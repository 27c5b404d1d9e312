// kv/attention_simd.cc — Highway kernels behind kv/attention_simd.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/attention_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "kv/online_softmax-inl.h"

#include <algorithm>
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

// Key and value rows as stored: float, or F16 / BF16 (hwy::float16_t, hwy::bfloat16_t:
// the 16 bits as stored) promoted to float where they are used. The promotion is exact,
// so a kernel reading stored rows in place computes the same float products in the same
// order as one reading rows converted by KvLoadF32 first, and gives identical bits.
HWY_INLINE VF LoadRow(DF df, const float* p) { return hn::LoadU(df, p); }
HWY_INLINE VF LoadRow(DF df, const hwy::float16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}
HWY_INLINE VF LoadRow(DF df, const hwy::bfloat16_t* p) {
  // BF16 is the top half of a float: widen and shift, as KvLoadF32 does.
  const hn::Rebind<uint16_t, DF> d16;
  const hn::Rebind<uint32_t, DF> d32;
  const auto wide = hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p))));
  return hn::BitCast(df, wide);
}
HWY_INLINE float RowAt(const float* p, size_t i) { return p[i]; }
HWY_INLINE float RowAt(const hwy::float16_t* p, size_t i) {
  return f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
}
HWY_INLINE float RowAt(const hwy::bfloat16_t* p, size_t i) {
  return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
}

// The one form of scale * <q, k> that the row-by-row kernels (AttendBlock, and
// AttendRows4 for several queries) compute, so that a query gets bit-identical scores
// whichever of them runs it and wherever in a block its keys start: one accumulator per
// lane over the head_dim slices in order, the lanes summed by SumOfLanes, the leftover
// dims added one at a time, then one multiply by scale. (The transposed multi-query
// kernel further down sums over head_dim per lane instead, so it rounds differently.)
template <class T>
HWY_INLINE float DotTail(const float* q, const T* k, int from, int D, float s) {
  for (int i = from; i < D; ++i) s += q[i] * RowAt(k, size_t(i));
  return s;
}

template <class T>
HWY_INLINE float ScaledDot(const float* q, const T* k, int D, float scale) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const int vec_end = D / lanes * lanes;
  VF a = hn::Zero(df);
  for (int i = 0; i < vec_end; i += lanes) a = hn::MulAdd(hn::LoadU(df, q + i), LoadRow(df, k + i), a);
  return DotTail(q, k, vec_end, D, hn::GetLane(hn::SumOfLanes(df, a))) * scale;
}

// acc * correction + sum_t p[t] v[t][i] for a dim i past the last full vector: the same
// order as the vector part (one chain, keys in order).
template <class T>
HWY_INLINE float AccTail(float acc, float correction, const float* p, const T* v, int from, int to, int D, int i) {
  float a = acc * correction;
  for (int t = from; t < to; ++t) a += p[t] * RowAt(v, size_t(t) * D + i);
  return a;
}

// Software prefetch of bytes [from, to) of p, one cache line at a time. The one-query
// path reads each KV head's block of a layer once per step: the hardware prefetcher
// follows the rows inside a block but not the jump to the next block (another
// allocation), so the next block is requested while this one is computed.
HWY_INLINE void PrefetchBytes(const void* p, size_t from, size_t to) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (size_t b = from; b < to; b += 64) hwy::Prefetch(bytes + b);
}

// What to prefetch while a block is attended: `bytes` of keys at k and of values at v
// (null: nothing).
struct NextBlock {
  const void* k = nullptr;
  const void* v = nullptr;
  size_t bytes = 0;
};

// scores[j * count + t] = ScaledDot(q_j, k_t) for the NQ queries q_j = q + j * D and the
// keys t < count: four keys at a time share each load of a query, and every query each
// load (and promotion) of a key. Each score is ScaledDot's chain, whatever NQ.
// The next block's rows are prefetched in even slices over the groups of four keys.
template <int NQ, class T>
inline void Scores(const float* q, const T* k, int count, int D, float scale, float* scores, const NextBlock& next) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const int vec_end = D / lanes * lanes;
  const size_t groups = size_t(count / 4);
  const size_t slice = next.k && groups > 0 ? (next.bytes / groups + 64) & ~size_t(63) : 0;
  size_t fetched = 0;
  int t = 0;
  for (; t + 4 <= count; t += 4) {
    if (slice > 0 && fetched < next.bytes) {
      const size_t to = std::min(next.bytes, fetched + slice);
      PrefetchBytes(next.k, fetched, to);
      PrefetchBytes(next.v, fetched, to);
      fetched = to;
    }
    const T* kt[4];
    for (int c = 0; c < 4; ++c) kt[c] = k + size_t(t + c) * D;
    VF a[NQ][4];
    for (int j = 0; j < NQ; ++j)
      for (int c = 0; c < 4; ++c) a[j][c] = hn::Zero(df);
    for (int i = 0; i < vec_end; i += lanes) {
      const VF k0 = LoadRow(df, kt[0] + i), k1 = LoadRow(df, kt[1] + i), k2 = LoadRow(df, kt[2] + i),
               k3 = LoadRow(df, kt[3] + i);
      for (int j = 0; j < NQ; ++j) {
        const VF qv = hn::LoadU(df, q + size_t(j) * D + i);
        a[j][0] = hn::MulAdd(qv, k0, a[j][0]);
        a[j][1] = hn::MulAdd(qv, k1, a[j][1]);
        a[j][2] = hn::MulAdd(qv, k2, a[j][2]);
        a[j][3] = hn::MulAdd(qv, k3, a[j][3]);
      }
    }
    for (int j = 0; j < NQ; ++j)
      for (int c = 0; c < 4; ++c)
        scores[size_t(j) * count + t + c] =
            DotTail(q + size_t(j) * D, kt[c], vec_end, D, hn::GetLane(hn::SumOfLanes(df, a[j][c]))) * scale;
  }
  if (next.k && fetched < next.bytes) {
    PrefetchBytes(next.k, fetched, next.bytes);
    PrefetchBytes(next.v, fetched, next.bytes);
  }
  for (; t < count; ++t)
    for (int j = 0; j < NQ; ++j)
      scores[size_t(j) * count + t] = ScaledDot(q + size_t(j) * D, k + size_t(t) * D, D, scale);
}

// NQ queries (q + j * D, state m[j], l[j], acc + j * D) against one block: each key and
// value row is loaded and promoted once for all of them, and each query's arithmetic is
// the one-query form (NQ = 1), so a query's result does not depend on NQ.
template <int NQ, class T>
void AttendBlockT(const float* q, const T* k, const T* v, int count, int head_dim, float scale, float* scores,
                  float* m, float* l, float* acc, const NextBlock& next) {
  if (count <= 0) return;
  const int D = head_dim;
  Scores<NQ>(q, k, count, D, scale, scores, next);
  // Rescale what was accumulated under the old max by `correction`.
  float correction[NQ];
  for (int j = 0; j < NQ; ++j) correction[j] = OnlineSoftmaxBlock(scores + size_t(j) * count, count, m[j], l[j]);
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  // acc = acc * correction + sum_t p_t v_t: each slice of head_dim is one FMA chain over
  // the tokens in order (the form AttendRows4 repeats); two slices at a time hide the
  // FMA latency.
  const int vec_end = D / lanes * lanes;
  int i = 0;
  for (; i + 2 * lanes <= vec_end; i += 2 * lanes) {
    VF a0[NQ], a1[NQ];
    for (int j = 0; j < NQ; ++j) {
      const VF vc = hn::Set(df, correction[j]);
      a0[j] = hn::Mul(hn::LoadU(df, acc + size_t(j) * D + i), vc);
      a1[j] = hn::Mul(hn::LoadU(df, acc + size_t(j) * D + i + lanes), vc);
    }
    for (int u = 0; u < count; ++u) {
      const T* vu = v + size_t(u) * D + i;
      const VF v0 = LoadRow(df, vu), v1 = LoadRow(df, vu + lanes);
      for (int j = 0; j < NQ; ++j) {
        const VF p = hn::Set(df, scores[size_t(j) * count + u]);
        a0[j] = hn::MulAdd(p, v0, a0[j]);
        a1[j] = hn::MulAdd(p, v1, a1[j]);
      }
    }
    for (int j = 0; j < NQ; ++j) {
      hn::StoreU(a0[j], df, acc + size_t(j) * D + i);
      hn::StoreU(a1[j], df, acc + size_t(j) * D + i + lanes);
    }
  }
  for (; i < vec_end; i += lanes) {
    VF a0[NQ];
    for (int j = 0; j < NQ; ++j) a0[j] = hn::Mul(hn::LoadU(df, acc + size_t(j) * D + i), hn::Set(df, correction[j]));
    for (int u = 0; u < count; ++u) {
      const VF vr = LoadRow(df, v + size_t(u) * D + i);
      for (int j = 0; j < NQ; ++j) a0[j] = hn::MulAdd(hn::Set(df, scores[size_t(j) * count + u]), vr, a0[j]);
    }
    for (int j = 0; j < NQ; ++j) hn::StoreU(a0[j], df, acc + size_t(j) * D + i);
  }
  for (int j = 0; j < NQ; ++j)
    for (int d = vec_end; d < D; ++d)
      acc[size_t(j) * D + d] = AccTail(acc[size_t(j) * D + d], correction[j], scores + size_t(j) * count, v, 0,
                                       count, D, d);
}

void AttendBlock(const float* q, const float* k, const float* v, int count, int head_dim, float scale,
                 float* scores, float* m, float* l, float* acc) {
  AttendBlockT<1>(q, k, v, count, head_dim, scale, scores, m, l, acc, NextBlock{});
}

// Queries sharing a block: as many at once as the registers hold (the score loop keeps
// four accumulators per query), the first pass prefetching the next block.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM_A64
constexpr int kMaxSharedQueries = 4;  // 16 accumulators of 32 registers
#else
constexpr int kMaxSharedQueries = 2;  // 8 of 16
#endif

template <class T>
void AttendBlockQueries(const float* q, int nq, const T* k, const T* v, int count, int D, float scale,
                        float* scores, float* m, float* l, float* acc, NextBlock next) {
  for (int j = 0; j < nq;) {
    const int n = std::min(nq - j, kMaxSharedQueries);
    const size_t at = size_t(j) * D;
    if (n >= 4) {
      AttendBlockT<4>(q + at, k, v, count, D, scale, scores, m + j, l + j, acc + at, next);
      j += 4;
    } else if (n >= 2) {
      AttendBlockT<2>(q + at, k, v, count, D, scale, scores, m + j, l + j, acc + at, next);
      j += 2;
    } else {
      AttendBlockT<1>(q + at, k, v, count, D, scale, scores, m + j, l + j, acc + at, next);
      j += 1;
    }
    next = NextBlock{};  // prefetched once
  }
}

void AttendBlockStored(DType dtype, const float* q, int nq, const void* k, const void* v, int count, int head_dim,
                       float scale, float* scores, float* m, float* l, float* acc, const void* next_k,
                       const void* next_v, int next_count) {
  const NextBlock next{next_k, next_v, next_k ? size_t(next_count) * head_dim * dtype_size(dtype) : 0};
  if (dtype == DType::kF16) {
    AttendBlockQueries(q, nq, static_cast<const hwy::float16_t*>(k), static_cast<const hwy::float16_t*>(v), count,
                       head_dim, scale, scores, m, l, acc, next);
  } else if (dtype == DType::kBF16) {
    AttendBlockQueries(q, nq, static_cast<const hwy::bfloat16_t*>(k), static_cast<const hwy::bfloat16_t*>(v), count,
                       head_dim, scale, scores, m, l, acc, next);
  } else {
    AttendBlockQueries(q, nq, static_cast<const float*>(k), static_cast<const float*>(v), count, head_dim, scale,
                       scores, m, l, acc, next);
  }
}

// Scores of four queries against key rows k0 and k1 (two keys: eight independent chains),
// each ScaledDot's form. k1 null: only k0.
HWY_INLINE void Scores4(const float* const q[4], const float* k0, const float* k1, int D, float scale, float* s0,
                        float* s1) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const int vec_end = D / lanes * lanes;
  VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  VF b0 = hn::Zero(df), b1 = hn::Zero(df), b2 = hn::Zero(df), b3 = hn::Zero(df);
  if (k1 != nullptr) {
    for (int i = 0; i < vec_end; i += lanes) {
      const VF x = hn::LoadU(df, k0 + i), y = hn::LoadU(df, k1 + i);
      const VF q0 = hn::LoadU(df, q[0] + i), q1 = hn::LoadU(df, q[1] + i);
      const VF q2 = hn::LoadU(df, q[2] + i), q3 = hn::LoadU(df, q[3] + i);
      a0 = hn::MulAdd(q0, x, a0);
      a1 = hn::MulAdd(q1, x, a1);
      a2 = hn::MulAdd(q2, x, a2);
      a3 = hn::MulAdd(q3, x, a3);
      b0 = hn::MulAdd(q0, y, b0);
      b1 = hn::MulAdd(q1, y, b1);
      b2 = hn::MulAdd(q2, y, b2);
      b3 = hn::MulAdd(q3, y, b3);
    }
    s1[0] = DotTail(q[0], k1, vec_end, D, hn::GetLane(hn::SumOfLanes(df, b0))) * scale;
    s1[1] = DotTail(q[1], k1, vec_end, D, hn::GetLane(hn::SumOfLanes(df, b1))) * scale;
    s1[2] = DotTail(q[2], k1, vec_end, D, hn::GetLane(hn::SumOfLanes(df, b2))) * scale;
    s1[3] = DotTail(q[3], k1, vec_end, D, hn::GetLane(hn::SumOfLanes(df, b3))) * scale;
  } else {
    for (int i = 0; i < vec_end; i += lanes) {
      const VF x = hn::LoadU(df, k0 + i);
      a0 = hn::MulAdd(hn::LoadU(df, q[0] + i), x, a0);
      a1 = hn::MulAdd(hn::LoadU(df, q[1] + i), x, a1);
      a2 = hn::MulAdd(hn::LoadU(df, q[2] + i), x, a2);
      a3 = hn::MulAdd(hn::LoadU(df, q[3] + i), x, a3);
    }
  }
  s0[0] = DotTail(q[0], k0, vec_end, D, hn::GetLane(hn::SumOfLanes(df, a0))) * scale;
  s0[1] = DotTail(q[1], k0, vec_end, D, hn::GetLane(hn::SumOfLanes(df, a1))) * scale;
  s0[2] = DotTail(q[2], k0, vec_end, D, hn::GetLane(hn::SumOfLanes(df, a2))) * scale;
  s0[3] = DotTail(q[3], k0, vec_end, D, hn::GetLane(hn::SumOfLanes(df, a3))) * scale;
}

// Up to four queries against one block stored row by row (at most 64 keys), query j
// seeing keys [lo[j], hi[j]) of it: a sliding window's lower bound and a causal or image
// upper bound, per query. Each query's state ends bit-identical to
// AttendBlock(q_j, k + lo_j * D, v + lo_j * D, hi_j - lo_j): the same ScaledDot per key,
// the same OnlineSoftmaxBlock call on exactly its own scores (nothing outside its range
// reaches its max, sum or weights), and the same one-chain-per-slice accumulation over
// its own keys in order. Keys outside a query's range are never multiplied into its
// accumulator, not even with weight 0 (that would be exact only for finite values:
// 0 * inf is NaN). A query with an empty range is left untouched, as the one-query path
// skips it.
void AttendRows4(const float* const* qs, int nq, const float* k, const float* v, int D, float scale, const int* lo,
                 const int* hi, float* scores, float* m, float* l, float* const* accs) {
  constexpr int kStride = 64;  // scores of key t: scores[t * 4 + j], j the query
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const int vec_end = D / lanes * lanes;
  int first = kStride, last = 0, common_lo = 0, common_hi = nq == 4 ? kStride : 0;
  bool active[4] = {false, false, false, false};
  int lo_of[4] = {0, 0, 0, 0}, hi_of[4] = {0, 0, 0, 0};
  for (int j = 0; j < nq; ++j) {
    lo_of[j] = lo[j];
    hi_of[j] = hi[j];
    common_lo = lo[j] > common_lo ? lo[j] : common_lo;
    common_hi = hi[j] < common_hi ? hi[j] : common_hi;
    if (lo[j] >= hi[j]) continue;
    active[j] = true;
    first = lo[j] < first ? lo[j] : first;
    last = hi[j] > last ? hi[j] : last;
  }
  if (first >= last) return;
  const float* q[4] = {qs[0], qs[nq > 1 ? 1 : 0], qs[nq > 2 ? 2 : 0], qs[nq > 3 ? 3 : 0]};
  // Scores of every query for keys [first, last), two keys at a time; each key load
  // serves four queries. Interleaved (key-major) so that one query's weights are
  // scores[t * 4 + j]; gathered per query for the softmax below.
  int t = first;
  for (; t + 2 <= last; t += 2)
    Scores4(q, k + size_t(t) * D, k + size_t(t + 1) * D, D, scale, scores + t * 4, scores + (t + 1) * 4);
  if (t < last) Scores4(q, k + size_t(t) * D, nullptr, D, scale, scores + t * 4, nullptr);
  // Online softmax per query over its own keys only (on a contiguous copy: the shared
  // routine takes a plain array), weights written back in place.
  float correction[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  float own[kStride];
  for (int j = 0; j < nq; ++j) {
    if (!active[j]) continue;
    for (int u = lo[j]; u < hi[j]; ++u) own[u] = scores[u * 4 + j];
    correction[j] = OnlineSoftmaxBlock(own + lo[j], hi[j] - lo[j], m[j], l[j]);
    for (int u = lo[j]; u < hi[j]; ++u) scores[u * 4 + j] = own[u];
  }
  // acc_j = acc_j * correction_j + sum over its keys of p_jt v_t, keys in order. Keys every
  // query sees share each value load; at the ragged edges each query takes only its own.
  // Two slices of head_dim at a time (eight chains), then one.
  int i = 0;
  for (; i + 2 * lanes <= vec_end; i += 2 * lanes) {
    VF c[8];
    for (int j = 0; j < 4; ++j) {
      const VF corr = hn::Set(df, correction[j]);
      c[j] = active[j] ? hn::Mul(hn::LoadU(df, accs[j] + i), corr) : hn::Zero(df);
      c[4 + j] = active[j] ? hn::Mul(hn::LoadU(df, accs[j] + i + lanes), corr) : hn::Zero(df);
    }
    for (int u = first; u < last; ++u) {
      const VF x = hn::LoadU(df, v + size_t(u) * D + i), y = hn::LoadU(df, v + size_t(u) * D + i + lanes);
      const float* p = scores + u * 4;
      if (u >= common_lo && u < common_hi) {  // all four queries see key u
        for (int j = 0; j < 4; ++j) {
          const VF pj = hn::Set(df, p[j]);
          c[j] = hn::MulAdd(pj, x, c[j]);
          c[4 + j] = hn::MulAdd(pj, y, c[4 + j]);
        }
        continue;
      }
      for (int j = 0; j < 4; ++j)
        if (u >= lo_of[j] && u < hi_of[j]) {
          const VF pj = hn::Set(df, p[j]);
          c[j] = hn::MulAdd(pj, x, c[j]);
          c[4 + j] = hn::MulAdd(pj, y, c[4 + j]);
        }
    }
    for (int j = 0; j < 4; ++j)
      if (active[j]) {
        hn::StoreU(c[j], df, accs[j] + i);
        hn::StoreU(c[4 + j], df, accs[j] + i + lanes);
      }
  }
  for (; i < vec_end; i += lanes) {
    VF c[4];
    for (int j = 0; j < 4; ++j)
      c[j] = active[j] ? hn::Mul(hn::LoadU(df, accs[j] + i), hn::Set(df, correction[j])) : hn::Zero(df);
    for (int u = first; u < last; ++u) {
      const VF x = hn::LoadU(df, v + size_t(u) * D + i);
      const float* p = scores + u * 4;
      for (int j = 0; j < 4; ++j)
        if (u >= lo_of[j] && u < hi_of[j]) c[j] = hn::MulAdd(hn::Set(df, p[j]), x, c[j]);
    }
    for (int j = 0; j < 4; ++j)
      if (active[j]) hn::StoreU(c[j], df, accs[j] + i);
  }
  for (int j = 0; j < nq; ++j) {
    if (!active[j]) continue;
    for (int u = lo[j]; u < hi[j]; ++u) own[u] = scores[u * 4 + j];
    for (int d = vec_end; d < D; ++d) accs[j][d] = AccTail(accs[j][d], correction[j], own, v, lo[j], hi[j], D, d);
  }
}

// a[j][b] += w[j][r] * x_r[b] for r = 0..n-1 in order, x_r the NV vectors at
// x + r * x_stride: each row's vectors are loaded once for the four weights, and every
// chain sums over r in order whatever NV. The inner loop of both products below (scores:
// rows of transposed keys weighted by the queries; sums: value rows weighted by the
// probabilities).
template <int NV>
HWY_INLINE void AccumulateOuter(VF (&a)[4][NV], const float* const w[4], const float* x, size_t x_stride, int n) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  for (int r = 0; r < n; ++r) {
    VF xr[NV];
#pragma GCC unroll 8
    for (int b = 0; b < NV; ++b) xr[b] = hn::LoadU(df, x + size_t(r) * x_stride + b * lanes);
#pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) {
      const VF wj = hn::Set(df, w[j][r]);
#pragma GCC unroll 8
      for (int b = 0; b < NV; ++b) a[j][b] = hn::MulAdd(wj, xr[b], a[j][b]);
    }
  }
}

// Scores of four queries q for NV vectors of transposed keys from `col` (col[d * stride]),
// times scale, into scores[j * stride]. Two vectors where there are two: eight
// independent chains keep both multiply-add pipes busy (four wait on the latency), and
// each broadcast of q serves both. Each chain sums over d in order whatever NV, so a
// score does not depend on which form computed it.
template <int NV>
HWY_INLINE void GroupScores(const float* const q[4], const float* col, int stride, int D, VF vscale, float* scores) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  VF a[4][NV];
#pragma GCC unroll 8
  for (int j = 0; j < 4; ++j)
#pragma GCC unroll 8
    for (int b = 0; b < NV; ++b) a[j][b] = hn::Zero(df);
  AccumulateOuter<NV>(a, q, col, size_t(stride), D);
#pragma GCC unroll 8
  for (int j = 0; j < 4; ++j)
#pragma GCC unroll 8
    for (int b = 0; b < NV; ++b) hn::StoreU(hn::Mul(a[j][b], vscale), df, scores + size_t(j) * stride + b * lanes);
}

// acc_j = acc_j * correction_j + sum over keys u < count of p_j[u] v_u, on NV slices of
// head_dim from i, for the nq queries (the rest run on zero weights and are not stored).
// Each chain sums over the keys in order whatever NV.
template <int NV>
HWY_INLINE void GroupAccumulate(const float* const p[4], int nq, const float* correction, const float* v, int count,
                                int D, int i, float* const* accs) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  VF c[4][NV];
#pragma GCC unroll 8
  for (int j = 0; j < 4; ++j)
#pragma GCC unroll 8
    for (int b = 0; b < NV; ++b)
      c[j][b] = j < nq ? hn::Mul(hn::LoadU(df, accs[j] + i + b * lanes), hn::Set(df, correction[j])) : hn::Zero(df);
  AccumulateOuter<NV>(c, p, v + i, size_t(D), count);
#pragma GCC unroll 8
  for (int j = 0; j < nq; ++j)
#pragma GCC unroll 8
    for (int b = 0; b < NV; ++b) hn::StoreU(c[j][b], df, accs[j] + i + b * lanes);
}

// Up to four queries against one block whose keys are stored transposed (kt[d * stride + t],
// stride a multiple of the vector length, zero padded): no horizontal sums, and every key
// and value load is shared by the queries. Query j sees keys [0, visible[j]).
void AttendGroup4(const float* const* qs, int nq, const float* kt, int stride, const float* v, int count, int D,
                  float scale, const int* visible, float* scores, float* m, float* l, float* const* accs) {
  const DF df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const float* const q[4] = {qs[0], qs[nq > 1 ? 1 : 0], qs[nq > 2 ? 2 : 0], qs[nq > 3 ? 3 : 0]};
  int max_visible = 0;
  for (int j = 0; j < nq; ++j) max_visible = visible[j] > max_visible ? visible[j] : max_visible;
  if (max_visible <= 0) return;
  const VF vscale = hn::Set(df, scale);
  // Two vectors of keys at a time, then one (t + 2·lanes <= stride: kt is zero padded).
  int t = 0;
  for (; t + lanes < max_visible; t += 2 * lanes) GroupScores<2>(q, kt + t, stride, D, vscale, scores + t);
  for (; t < max_visible; t += lanes) GroupScores<1>(q, kt + t, stride, D, vscale, scores + t);
  // Online softmax per query; keys past a query's visible range get weight 0.
  float correction[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  for (int j = 0; j < 4; ++j) {
    float* s = scores + size_t(j) * stride;
    const int vis = j < nq ? visible[j] : 0;
    if (vis <= 0) {
      for (int u = 0; u < max_visible; ++u) s[u] = 0.0f;
      continue;
    }
    correction[j] = OnlineSoftmaxBlock(s, vis, m[j], l[j]);
    for (int u = vis; u < max_visible; ++u) s[u] = 0.0f;
  }
  // acc_j = acc_j * correction_j + sum_t p_jt v_t, two slices of head_dim at a time, then
  // one, then the dims past the last whole vector.
  const float* const p[4] = {scores, scores + stride, scores + 2 * stride, scores + 3 * stride};
  const int vec_end = D / lanes * lanes;
  int i = 0;
  for (; i + 2 * lanes <= vec_end; i += 2 * lanes) GroupAccumulate<2>(p, nq, correction, v, max_visible, D, i, accs);
  for (; i < vec_end; i += lanes) GroupAccumulate<1>(p, nq, correction, v, max_visible, D, i, accs);
  for (int j = 0; j < nq; ++j)
    for (int d = vec_end; d < D; ++d) {
      float a = accs[j][d] * correction[j];
      for (int u = 0; u < max_visible; ++u) a += p[j][u] * v[size_t(u) * D + d];
      accs[j][d] = a;
    }
}

size_t Lanes() { return hn::Lanes(DF()); }

void AttendBlockRows(const float* const* qs, int nq, const float* k, const float* v, int D, float scale,
                     const int* lo, const int* hi, float* scores, float* m, float* l, float* const* accs) {
  for (int j = 0; j < nq; j += 4) {
    const int n = nq - j < 4 ? nq - j : 4;
    AttendRows4(qs + j, n, k, v, D, scale, lo + j, hi + j, scores, m + j, l + j, accs + j);
  }
}

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
HWY_EXPORT(AttendBlockStored);
HWY_EXPORT(AttendBlockMulti);
HWY_EXPORT(Lanes);
HWY_EXPORT(AttendBlockRows);

void kv_load_f32(DType dtype, const void* src, size_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(KvLoadF32)(dtype, src, n, dst);
}
void kv_store(DType dtype, const float* src, size_t n, void* dst) { HWY_DYNAMIC_DISPATCH(KvStore)(dtype, src, n, dst); }
void attend_block(const float* q, const float* k, const float* v, int count, int head_dim, float scale,
                  float* scores, float* m, float* l, float* acc) {
  HWY_DYNAMIC_DISPATCH(AttendBlock)(q, k, v, count, head_dim, scale, scores, m, l, acc);
}

void attend_block_stored(DType dtype, const float* q, int nq, const void* k, const void* v, int count,
                         int head_dim, float scale, float* scores, float* m, float* l, float* acc, const void* next_k,
                         const void* next_v, int next_count) {
  HWY_DYNAMIC_DISPATCH(AttendBlockStored)(dtype, q, nq, k, v, count, head_dim, scale, scores, m, l, acc, next_k,
                                          next_v, next_count);
}

void attend_block_multi(const float* const* qs, int nq, const float* kt, int stride, const float* v, int count,
                        int head_dim, float scale, const int* visible, float* scores, float* m, float* l,
                        float* const* accs) {
  HWY_DYNAMIC_DISPATCH(AttendBlockMulti)(qs, nq, kt, stride, v, count, head_dim, scale, visible, scores, m, l, accs);
}
size_t attention_lanes() { return HWY_DYNAMIC_DISPATCH(Lanes)(); }

void attend_block_rows(const float* const* qs, int nq, const float* k, const float* v, int head_dim, float scale,
                       const int* lo, const int* hi, float* scores, float* m, float* l, float* const* accs) {
  HWY_DYNAMIC_DISPATCH(AttendBlockRows)(qs, nq, k, v, head_dim, scale, lo, hi, scores, m, l, accs);
}

}  // namespace nextn
#endif  // HWY_ONCE
