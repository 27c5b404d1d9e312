// kv/kv_kernels.cc — SIMD attention kernels over the KV row formats of
// kv_codec.h (scores against stored rows, p·V accumulation, softmax helpers).
//
// Codes are never expanded into a history buffer: each 16-code chunk of a row
// is widened in registers (one load + shifts), turned into floats by a table
// lookup (Turbo: the Lloyd–Max centroids; Q8/Q4: int → float) and consumed by
// the FMAs right away. Scores are token-major (one horizontal sum per token and
// query); accumulation is chunk-major so the query accumulators stay in registers.
// Up to 4 queries (GQA heads × rows) share each decoded chunk.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/kv_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kv/online_softmax-inl.h"

#include <algorithm>
#include <cstring>

#include "kv/f16_store.h"
#include "kv/kv_codec.h"
#include "util/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
using DH = hn::Rebind<hwy::float16_t, DF>;

template <RowCodec C>
constexpr bool kTableInRegister = !HWY_HAVE_SCALABLE && hn::MaxLanes(DF()) >= (C == RowCodec::kTurbo3 ? 8 : 16);

// Values of coordinates [16j + h, 16j + h + N) of one group (unscaled codes).
// `codes` points after the group's header; G is the group size.
template <RowCodec C>
HWY_INLINE VF DecodeChunk(const uint8_t* HWY_RESTRICT codes, int G, int j, size_t h, const VF table,
                          const float* HWY_RESTRICT table_ptr) {
  const DF df;
  const DU du;
  const DI di;
  const DU8 du8;
  if constexpr (C == RowCodec::kF16) {
    const DH dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(codes) + 16 * j + h));
  } else if constexpr (C == RowCodec::kQ8) {
    return hn::ConvertTo(df, hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(du8, codes + 16 * j + h))));
  } else {
    hn::Vec<DU> code;
    if constexpr (C == RowCodec::kTurbo3) {
      auto low = hn::PromoteTo(du, hn::LoadU(du8, codes + (j / 4) * 16 + h));
      low = hn::And(hn::ShiftRightSame(low, 2 * (j & 3)), hn::Set(du, 3u));
      if (G == 128) {  // high plane: byte l, bit j = bit 2 of code 16j + l
        const auto hb = hn::PromoteTo(du, hn::LoadU(du8, codes + 32 + h));
        const auto high = j >= 2 ? hn::ShiftRightSame(hb, j - 2) : hn::ShiftLeftSame(hb, 2 - j);
        code = hn::OrAnd(low, high, hn::Set(du, 4u));
      } else {  // high plane: u16 word j, bit l
        uint16_t word;
        std::memcpy(&word, codes + G / 4 + 2 * j, 2);
        // Bit l of the word lands on bit 2 of lane l.
        const auto high = hn::Set(du, static_cast<uint32_t>(word) << 2) >> hn::Iota(du, static_cast<uint32_t>(h));
        code = hn::OrAnd(low, high, hn::Set(du, 4u));
      }
    } else {  // nibbles: Q4, Turbo4
      auto b = hn::PromoteTo(du, hn::LoadU(du8, codes + (j / 2) * 16 + h));
      code = (j & 1) ? hn::ShiftRight<4>(b) : hn::And(b, hn::Set(du, 15u));
    }
    const auto icode = hn::BitCast(di, code);
    if constexpr (C == RowCodec::kQ4) {
      return hn::ConvertTo(df, icode);
    } else if constexpr (kTableInRegister<C>) {
      return hn::TableLookupLanes(table, hn::IndicesFromVec(df, icode));
    } else {
      return hn::GatherIndex(df, table_ptr, icode);
    }
  }
}

// scale[t] (and bias[t]) of group g for n tokens, converted from f16 in bulk.
HWY_INLINE void LoadScales(const uint8_t* rows, size_t stride, size_t offset, int n, float* out) {
  HWY_ALIGN hwy::float16_t tmp[kKernelTile + 16];
  for (int t = 0; t < n; ++t) std::memcpy(&tmp[t], rows + t * stride + offset, 2);
  const DF df;
  const DH dh;
  const size_t N = hn::Lanes(df);
  for (int t = 0; t < n; t += static_cast<int>(N)) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, tmp + t)), df, out + t);
}

#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
// Lane i of the result = sum of the lanes of v[i], for Lanes(df) vectors (a transpose-add tree).
template <class D>
HWY_INLINE hn::Vec<D> SumEach(D df, hn::Vec<D>* v) {
  constexpr size_t N = hn::MaxLanes(D());
  if constexpr (N == 1) {
    return v[0];
  } else {
    for (size_t width = N; width > 1; width /= 2)
      for (size_t i = 0; i < width / 2; ++i)
        v[i] = hn::Add(hn::ConcatEven(df, v[2 * i + 1], v[2 * i]), hn::ConcatOdd(df, v[2 * i + 1], v[2 * i]));
    return v[0];
  }
}
#endif

// Per-token dot products of NQ queries against one group of one row.
template <RowCodec C, int G, int NQ>
HWY_INLINE void DotGroup(const uint8_t* HWY_RESTRICT codes, int g_size, const float* HWY_RESTRICT qg, int dim,
                         const VF table, const float* table_buf, VF& a0, VF& a1, VF& a2, VF& a3) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const int gs = G ? G : g_size;
#pragma GCC unroll 8
  for (int j = 0; j < gs / 16; ++j) {
    for (size_t h = 0; h < 16; h += N) {
      const VF v = DecodeChunk<C>(codes, gs, j, h, table, table_buf);
      const size_t i = 16 * j + h;
      a0 = hn::MulAdd(v, hn::LoadU(df, qg + i), a0);
      if constexpr (NQ > 1) a1 = hn::MulAdd(v, hn::LoadU(df, qg + dim + i), a1);
      if constexpr (NQ > 2) a2 = hn::MulAdd(v, hn::LoadU(df, qg + 2 * dim + i), a2);
      if constexpr (NQ > 3) a3 = hn::MulAdd(v, hn::LoadU(df, qg + 3 * dim + i), a3);
    }
  }
}

template <RowCodec C, int G, int NQ>
void ScoreBatch(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* q,
                const float* qsum, float* scores, int ld) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  const int ng = f.n_groups(), dim = f.dim, gs = G ? G : f.group;
  const size_t gb = f.group_bytes();
  const int hb = f.header_bytes();
  constexpr bool kBias = C == RowCodec::kQ8 || C == RowCodec::kQ4;
  HWY_ALIGN float table_buf[16] = {};
  if (f.table) std::copy(f.table, f.table + (C == RowCodec::kTurbo3 ? 8 : 16), table_buf);
  const VF table = hn::LoadU(df, table_buf);
  constexpr int kMaxGroups = kMaxRowDim / 32;
  HWY_ALIGN float scale[kMaxGroups][kKernelTile + 16], bias[kBias ? kMaxGroups : 1][kKernelTile + 16];
  for (int g = 0; g < ng; ++g) {
    if constexpr (C != RowCodec::kF16) LoadScales(rows, stride, g * gb, n_tok, scale[g]);
    if constexpr (kBias) LoadScales(rows, stride, g * gb + 2, n_tok, bias[g]);
  }
  float* out[4] = {scores, scores + ld, scores + 2 * ld, scores + 3 * ld};
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  constexpr size_t kN = hn::MaxLanes(DF());
  VF part[4][kN];
#endif
  for (int t0 = 0; t0 < n_tok; t0 += N) {
    const int nt = std::min(N, n_tok - t0);
    for (int u = 0; u < nt; ++u) {
      const int t = t0 + u;
      const uint8_t* row = rows + t * stride;
      VF s0 = hn::Zero(df), s1 = s0, s2 = s0, s3 = s0;
      for (int g = 0; g < ng; ++g) {
        VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
        DotGroup<C, G, NQ>(row + g * gb + hb, gs, q + g * gs, dim, table, table_buf, a0, a1, a2, a3);
        if constexpr (C == RowCodec::kF16) {
          s0 = a0, s1 = a1, s2 = a2, s3 = a3;
        } else {
          const VF sc = hn::Set(df, scale[g][t]);
          s0 = hn::MulAdd(sc, a0, s0);
          if constexpr (NQ > 1) s1 = hn::MulAdd(sc, a1, s1);
          if constexpr (NQ > 2) s2 = hn::MulAdd(sc, a2, s2);
          if constexpr (NQ > 3) s3 = hn::MulAdd(sc, a3, s3);
        }
      }
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
      part[0][u] = s0;
      if constexpr (NQ > 1) part[1][u] = s1;
      if constexpr (NQ > 2) part[2][u] = s2;
      if constexpr (NQ > 3) part[3][u] = s3;
#else
      const VF sv[4] = {s0, s1, s2, s3};
      for (int k = 0; k < NQ; ++k) out[k][t] = hn::GetLane(hn::SumOfLanes(df, sv[k]));
#endif
    }
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
    for (int k = 0; k < NQ; ++k) {
      for (int u = nt; u < N; ++u) part[k][u] = hn::Zero(df);
      HWY_ALIGN float sums[kN];
      hn::Store(SumEach(df, part[k]), df, sums);
      for (int u = 0; u < nt; ++u) out[k][t0 + u] = sums[u];
    }
#endif
    if constexpr (kBias) {
      for (int k = 0; k < NQ; ++k)
        for (int u = 0; u < nt; ++u) {
          float add = 0;
          for (int g = 0; g < ng; ++g) add += bias[g][t0 + u] * qsum[k * ng + g];
          out[k][t0 + u] += add;
        }
    }
  }
}

template <RowCodec C, int kG, int NQ>
void AccumBatch(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* p, int ld,
                float* acc) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const int G = kG ? kG : f.group, ng = f.n_groups(), dim = f.dim;
  const size_t gb = f.group_bytes();
  const int hb = f.header_bytes();
  HWY_ALIGN float table_buf[16] = {};
  if (f.table) std::copy(f.table, f.table + (C == RowCodec::kTurbo3 ? 8 : 16), table_buf);
  const VF table = hn::LoadU(df, table_buf);
  HWY_ALIGN float scale[kKernelTile + 16], bias[kKernelTile + 16];
  HWY_ALIGN float w[4][kKernelTile];
  for (int g = 0; g < ng; ++g) {
    float bsum[4] = {0, 0, 0, 0};
    if constexpr (C != RowCodec::kF16) LoadScales(rows, stride, g * gb, n_tok, scale);
    if constexpr (C == RowCodec::kQ8 || C == RowCodec::kQ4) LoadScales(rows, stride, g * gb + 2, n_tok, bias);
    for (int k = 0; k < NQ; ++k) {
      for (int t = 0; t < n_tok; ++t) {
        w[k][t] = C == RowCodec::kF16 ? p[k * ld + t] : p[k * ld + t] * scale[t];
        if constexpr (C == RowCodec::kQ8 || C == RowCodec::kQ4) bsum[k] += p[k * ld + t] * bias[t];
      }
    }
    const uint8_t* base = rows + g * gb + hb;
#pragma GCC unroll 8
    for (int j = 0; j < G / 16; ++j) {
      for (size_t h = 0; h < 16; h += N) {
        const size_t i = g * G + 16 * j + h;
        VF a0 = hn::LoadU(df, acc + i), a1 = a0, a2 = a0, a3 = a0;
        if constexpr (NQ > 1) a1 = hn::LoadU(df, acc + dim + i);
        if constexpr (NQ > 2) a2 = hn::LoadU(df, acc + 2 * dim + i);
        if constexpr (NQ > 3) a3 = hn::LoadU(df, acc + 3 * dim + i);
        // Second accumulators for odd tokens: halves the FMA dependency chain.
        VF b0 = hn::Zero(df), b1 = b0, b2 = b0, b3 = b0;
        int t = 0;
        for (; t + 1 < n_tok; t += 2) {
          const VF v = DecodeChunk<C>(base + t * stride, G, j, h, table, table_buf);
          const VF u = DecodeChunk<C>(base + (t + 1) * stride, G, j, h, table, table_buf);
          a0 = hn::MulAdd(hn::Set(df, w[0][t]), v, a0);
          b0 = hn::MulAdd(hn::Set(df, w[0][t + 1]), u, b0);
          if constexpr (NQ > 1) a1 = hn::MulAdd(hn::Set(df, w[1][t]), v, a1), b1 = hn::MulAdd(hn::Set(df, w[1][t + 1]), u, b1);
          if constexpr (NQ > 2) a2 = hn::MulAdd(hn::Set(df, w[2][t]), v, a2), b2 = hn::MulAdd(hn::Set(df, w[2][t + 1]), u, b2);
          if constexpr (NQ > 3) a3 = hn::MulAdd(hn::Set(df, w[3][t]), v, a3), b3 = hn::MulAdd(hn::Set(df, w[3][t + 1]), u, b3);
        }
        if (t < n_tok) {
          const VF v = DecodeChunk<C>(base + t * stride, G, j, h, table, table_buf);
          a0 = hn::MulAdd(hn::Set(df, w[0][t]), v, a0);
          if constexpr (NQ > 1) a1 = hn::MulAdd(hn::Set(df, w[1][t]), v, a1);
          if constexpr (NQ > 2) a2 = hn::MulAdd(hn::Set(df, w[2][t]), v, a2);
          if constexpr (NQ > 3) a3 = hn::MulAdd(hn::Set(df, w[3][t]), v, a3);
        }
        a0 = hn::Add(a0, b0);
        if constexpr (NQ > 1) a1 = hn::Add(a1, b1);
        if constexpr (NQ > 2) a2 = hn::Add(a2, b2);
        if constexpr (NQ > 3) a3 = hn::Add(a3, b3);
        if constexpr (C == RowCodec::kQ8 || C == RowCodec::kQ4) {
          a0 = hn::Add(a0, hn::Set(df, bsum[0]));
          if constexpr (NQ > 1) a1 = hn::Add(a1, hn::Set(df, bsum[1]));
          if constexpr (NQ > 2) a2 = hn::Add(a2, hn::Set(df, bsum[2]));
          if constexpr (NQ > 3) a3 = hn::Add(a3, hn::Set(df, bsum[3]));
        }
        hn::StoreU(a0, df, acc + i);
        if constexpr (NQ > 1) hn::StoreU(a1, df, acc + dim + i);
        if constexpr (NQ > 2) hn::StoreU(a2, df, acc + 2 * dim + i);
        if constexpr (NQ > 3) hn::StoreU(a3, df, acc + 3 * dim + i);
      }
    }
  }
}

template <RowCodec C, int G>
void ScoreCodec(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* q,
                const float* qsum, int nq, float* scores, int ld) {
  const int ng = f.n_groups();
  for (int k = 0; k < nq; k += 4) {
    const float* qk = q + static_cast<size_t>(k) * f.dim;
    const float* sk = qsum ? qsum + static_cast<size_t>(k) * ng : nullptr;
    float* out = scores + static_cast<size_t>(k) * ld;
    switch (std::min(4, nq - k)) {
      case 1: ScoreBatch<C, G, 1>(f, rows, stride, n_tok, qk, sk, out, ld); break;
      case 2: ScoreBatch<C, G, 2>(f, rows, stride, n_tok, qk, sk, out, ld); break;
      case 3: ScoreBatch<C, G, 3>(f, rows, stride, n_tok, qk, sk, out, ld); break;
      default: ScoreBatch<C, G, 4>(f, rows, stride, n_tok, qk, sk, out, ld); break;
    }
  }
}

template <RowCodec C, int G>
void AccumCodec(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* p, int ld,
                int nq, float* acc) {
  for (int k = 0; k < nq; k += 4) {
    const float* pk = p + static_cast<size_t>(k) * ld;
    float* ak = acc + static_cast<size_t>(k) * f.dim;
    switch (std::min(4, nq - k)) {
      case 1: AccumBatch<C, G, 1>(f, rows, stride, n_tok, pk, ld, ak); break;
      case 2: AccumBatch<C, G, 2>(f, rows, stride, n_tok, pk, ld, ak); break;
      case 3: AccumBatch<C, G, 3>(f, rows, stride, n_tok, pk, ld, ak); break;
      default: AccumBatch<C, G, 4>(f, rows, stride, n_tok, pk, ld, ak); break;
    }
  }
}

void ScoreRowsImpl(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* q,
                   const float* qsum, int nq, float* scores, int ld) {
  switch (f.codec) {
    case RowCodec::kF16: return ScoreCodec<RowCodec::kF16, 0>(f, rows, stride, n_tok, q, qsum, nq, scores, ld);
    case RowCodec::kQ8: return ScoreCodec<RowCodec::kQ8, 0>(f, rows, stride, n_tok, q, qsum, nq, scores, ld);
    case RowCodec::kQ4: return ScoreCodec<RowCodec::kQ4, 0>(f, rows, stride, n_tok, q, qsum, nq, scores, ld);
    case RowCodec::kTurbo3:
      if (f.group == 128) return ScoreCodec<RowCodec::kTurbo3, 128>(f, rows, stride, n_tok, q, qsum, nq, scores, ld);
      return ScoreCodec<RowCodec::kTurbo3, 64>(f, rows, stride, n_tok, q, qsum, nq, scores, ld);
    case RowCodec::kTurbo4:
      if (f.group == 128) return ScoreCodec<RowCodec::kTurbo4, 128>(f, rows, stride, n_tok, q, qsum, nq, scores, ld);
      return ScoreCodec<RowCodec::kTurbo4, 64>(f, rows, stride, n_tok, q, qsum, nq, scores, ld);
  }
}

void AccumulateRowsImpl(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* p,
                        int ld, int nq, float* acc) {
  switch (f.codec) {
    case RowCodec::kF16: return AccumCodec<RowCodec::kF16, 0>(f, rows, stride, n_tok, p, ld, nq, acc);
    case RowCodec::kQ8: return AccumCodec<RowCodec::kQ8, 0>(f, rows, stride, n_tok, p, ld, nq, acc);
    case RowCodec::kQ4: return AccumCodec<RowCodec::kQ4, 0>(f, rows, stride, n_tok, p, ld, nq, acc);
    case RowCodec::kTurbo3:
      if (f.group == 128) return AccumCodec<RowCodec::kTurbo3, 128>(f, rows, stride, n_tok, p, ld, nq, acc);
      return AccumCodec<RowCodec::kTurbo3, 64>(f, rows, stride, n_tok, p, ld, nq, acc);
    case RowCodec::kTurbo4:
      if (f.group == 128) return AccumCodec<RowCodec::kTurbo4, 128>(f, rows, stride, n_tok, p, ld, nq, acc);
      return AccumCodec<RowCodec::kTurbo4, 64>(f, rows, stride, n_tok, p, ld, nq, acc);
  }
}

float OnlineSoftmaxBlockImpl(float* scores, int n, float* m, float* l) {
  return OnlineSoftmaxBlock(scores, n, *m, *l);
}

void ScaleFloatsImpl(float* x, int n, float c) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF vc = hn::Set(df, c);
  int i = 0;
  for (; i + static_cast<int>(N) <= n; i += static_cast<int>(N)) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), vc), df, x + i);
  for (; i < n; ++i) x[i] *= c;
}

double TurboQuantizeImpl(const float* y, int n, float inv_norm, const float* boundaries, const float* centroids,
                         int levels, uint8_t* codes) {
  const DF df;
  const DI di;
  const int N = static_cast<int>(hn::Lanes(df));
  const VF vinv = hn::Set(df, inv_norm);
  VF csum = hn::Zero(df);
  HWY_ALIGN int32_t idx[16];
  int i = 0;
  for (; i + N <= n; i += N) {
    const VF v = hn::Mul(hn::LoadU(df, y + i), vinv);
    auto count = hn::Zero(di);
    for (int b = 0; b + 1 < levels; ++b)  // count of boundaries below v: mask lanes are −1
      count = hn::Sub(count, hn::BitCast(di, hn::VecFromMask(df, hn::Gt(v, hn::Set(df, boundaries[b])))));
    const VF c = hn::GatherIndex(df, centroids, count);
    csum = hn::MulAdd(c, c, csum);
    hn::Store(count, di, idx);
    for (int l = 0; l < N; ++l) codes[i + l] = static_cast<uint8_t>(idx[l]);
  }
  double total = hn::GetLane(hn::SumOfLanes(df, csum));
  for (; i < n; ++i) {
    const float v = y[i] * inv_norm;
    int c = 0;
    for (int b = 0; b + 1 < levels; ++b) c += v > boundaries[b];
    codes[i] = static_cast<uint8_t>(c);
    total += double(centroids[c]) * centroids[c];
  }
  return total;
}

void F32ToF16Impl(const float* x, int n, uint8_t* out) {
  int i = 0;
#if NEXTN_F16_DEMOTE_ROUNDS
  const DF df;
  const DH dh;
  const int N = static_cast<int>(hn::Lanes(df));
  auto* dst = reinterpret_cast<hwy::float16_t*>(out);
  for (; i + N <= n; i += N) hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, x + i)), dh, dst + i);
#endif
  auto* bits = reinterpret_cast<uint16_t*>(out);
  for (; i < n; ++i) bits[i] = nextn::f32_to_f16(x[i]);
}

void F16ToF32Impl(const uint8_t* in, int n, float* x) {
  const DF df;
  const DH dh;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto* src = reinterpret_cast<const hwy::float16_t*>(in);
  int i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, src + i)), df, x + i);
  for (; i < n; ++i) {
    HWY_ALIGN hwy::float16_t h[16] = {src[i]};
    x[i] = hn::GetLane(hn::PromoteTo(df, hn::Load(dh, h)));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(ScoreRowsImpl);
HWY_EXPORT(AccumulateRowsImpl);
HWY_EXPORT(OnlineSoftmaxBlockImpl);
HWY_EXPORT(ScaleFloatsImpl);
HWY_EXPORT(F32ToF16Impl);
HWY_EXPORT(TurboQuantizeImpl);
HWY_EXPORT(F16ToF32Impl);

void score_rows(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* q,
                const float* qsum, int nq, float* scores, int ld) {
  HWY_DYNAMIC_DISPATCH(ScoreRowsImpl)(f, rows, stride, n_tok, q, qsum, nq, scores, ld);
}
void accumulate_rows(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* p,
                     int ld, int nq, float* acc) {
  HWY_DYNAMIC_DISPATCH(AccumulateRowsImpl)(f, rows, stride, n_tok, p, ld, nq, acc);
}
float online_softmax_block(float* scores, int n, float& m, float& l) {
  return HWY_DYNAMIC_DISPATCH(OnlineSoftmaxBlockImpl)(scores, n, &m, &l);
}
void scale_floats(float* x, int n, float c) { HWY_DYNAMIC_DISPATCH(ScaleFloatsImpl)(x, n, c); }
double turbo_quantize(const float* y, int n, float inv_norm, const float* boundaries, const float* centroids,
                      int levels, uint8_t* codes) {
  return HWY_DYNAMIC_DISPATCH(TurboQuantizeImpl)(y, n, inv_norm, boundaries, centroids, levels, codes);
}
void f32_to_f16_row(const float* x, int n, uint8_t* out) { HWY_DYNAMIC_DISPATCH(F32ToF16Impl)(x, n, out); }
void f16_to_f32_row(const uint8_t* in, int n, float* x) { HWY_DYNAMIC_DISPATCH(F16ToF32Impl)(in, n, x); }

}  // namespace nextn
#endif  // HWY_ONCE
