// kernels/quantize_rows.cc — activation rows to int8 blocks of 32 (QuantizedRows,
// kernels/weight_format.h), once per quantized matmul, on the calling thread.
//
// Every target computes the same values: amax of the block, q = round-half-even(x · (127 /
// amax)) clamped to ±127 (the int8 rounding the test references model), scale = amax / 127.
// A block holding a NaN or an infinity gets a NaN scale, so the output rows that read it
// are NaN rather than quietly wrong.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quantize_rows.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cmath>

#include "kernels/weight_format.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void QuantizeRowsImpl(const float* x, int64_t n_rows, int64_t cols, int8_t* q, float* scale, float* sum,
                      int32_t* qsum) {
  const hn::CappedTag<float, kQuantGroup / 2> df;  // a half block is a whole number of vectors
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const int64_t blocks = cols / kQuantGroup, stride = quantized_rows_stride(cols);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t b = 0; b < stride; ++b) {
      float& s = scale[r * stride + b];
      float& t = sum[r * stride + b];
      int32_t* halves = qsum + r * 2 * stride + 2 * b;
      halves[0] = halves[1] = 0;
      s = t = 0.0f;
      if (b >= blocks) continue;
      const float* xb = x + r * cols + b * kQuantGroup;
      int8_t* qb = q + r * cols + b * kQuantGroup;
      auto amax = hn::Zero(df);
      auto finite = hn::FirstN(df, n);
      for (int64_t i = 0; i < kQuantGroup; i += n) {
        const auto v = hn::LoadU(df, xb + i);
        amax = hn::Max(amax, hn::Abs(v));
        finite = hn::And(finite, hn::IsFinite(v));
      }
      const float m = hn::GetLane(hn::MaxOfLanes(df, amax));
      if (!hn::AllTrue(df, finite) || !(m > 0.0f)) {  // non-finite input, or an all-zero block
        for (int i = 0; i < kQuantGroup; ++i) qb[i] = 0;
        if (m > 0.0f || !hn::AllTrue(df, finite)) s = t = NAN;
        continue;
      }
      const auto inv = hn::Set(df, 127.0f / m);
      const auto lo = hn::Set(di, -127), hi = hn::Set(di, 127);
      for (int64_t i = 0; i < kQuantGroup; i += n) {
        const auto v = hn::Min(hn::Max(hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), inv)), lo), hi);
        hn::StoreU(hn::DemoteTo(d8, v), d8, qb + i);
        halves[i / (kQuantGroup / 2)] += hn::GetLane(hn::SumOfLanes(di, v));
      }
      s = m / 127.0f;
      t = s * static_cast<float>(halves[0] + halves[1]);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(QuantizeRowsImpl);

void quantize_rows(const float* x, int64_t n_rows, int64_t cols, int8_t* q, float* scale, float* sum,
                   int32_t* qsum, QuantizedRows& out) {
  HWY_DYNAMIC_DISPATCH(QuantizeRowsImpl)(x, n_rows, cols, q, scale, sum, qsum);
  out.n_rows = n_rows;
  out.blocks = cols / kQuantGroup;
  out.stride = quantized_rows_stride(cols);
  out.q = q;
  out.scale = scale;
  out.sum = sum;
  out.qsum = qsum;
}

}  // namespace nextn
#endif  // HWY_ONCE
