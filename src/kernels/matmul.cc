// kernels/matmul.cc — y = x · Wᵀ (+ bias) for F32/F16/BF16 weights, float32 activations.
//
// One register-blocked tile kernel serves every batch size: a tile computes
// R rows × O outputs, loading each weight vector once and using it for all R
// rows. Decode (1 row) uses wide output tiles to keep several weight streams in
// flight; batches use R×O tiles so k rows cost far less than k decode calls.
//
// Every dot product (row r, output o) is accumulated in exactly the same order
// whatever the tile, batch size or thread count: one vector accumulator over
// blocks of 2·N columns (two FMAs per block), a lane reduction, then the
// leftover columns in scalar. So a row's result is bitwise independent of the
// rows it is batched with — speculative verification sees exactly the logits
// plain decoding would.
//
// BF16 weights are widened with integer shifts: a u32 lane holds elements 2j
// (low half) and 2j+1 (high half), so the activations are de-interleaved per
// 2·N block once per call to match.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
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

// Tile shapes: accumulators + weight vectors must fit the register file.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM_A64
constexpr int kMaxRows = 4, kMaxOuts = 4, kDecodeOuts = 8;  // 32 vector registers
#else
constexpr int kMaxRows = 2, kMaxOuts = 3, kDecodeOuts = 4;  // 16 vector registers
#endif
constexpr int64_t kPrefetchBlocks = 8;  // weight prefetch distance, in 2·N-column blocks
constexpr int kTableOuts = kDecodeOuts > kMaxOuts ? kDecodeOuts : kMaxOuts;

struct Job {
  DType dtype;
  const uint8_t* w;     // weight base
  size_t w_row_bytes;   // bytes per weight row
  int64_t cols;
  int64_t blocks;       // full 2·N-column blocks
  const float* x;       // prepared activations, row stride x_stride
  int64_t x_stride;
  const float* x_orig;  // original activations (scalar tail), row stride cols
  float* y;
  int64_t y_stride;
  const float* bias;
};

// Loads the two weight vectors of block b of weight row p.
template <DType kType>
HWY_INLINE void load_block(const uint8_t* p, int64_t b, VF& w0, VF& w1) {
  const DF df;
  const size_t n = hn::Lanes(df);
  if constexpr (kType == DType::kF32) {
    const float* f = reinterpret_cast<const float*>(p) + 2 * n * b;
    w0 = hn::LoadU(df, f);
    w1 = hn::LoadU(df, f + n);
  } else if constexpr (kType == DType::kF16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    const hwy::float16_t* h = reinterpret_cast<const hwy::float16_t*>(p) + 2 * n * b;
    w0 = hn::PromoteTo(df, hn::LoadU(dh, h));
    w1 = hn::PromoteTo(df, hn::LoadU(dh, h + n));
  } else {
    const hn::RebindToUnsigned<DF> du;
    const uint32_t* u32 = reinterpret_cast<const uint32_t*>(p) + n * b;
    const auto u = hn::LoadU(du, u32);
    w0 = hn::BitCast(df, hn::ShiftLeft<16>(u));                        // elements 2j
    w1 = hn::BitCast(df, hn::And(u, hn::Set(du, 0xFFFF0000u)));        // elements 2j+1
  }
}

template <DType kType>
HWY_INLINE float weight_at(const uint8_t* p, int64_t c) {
  if constexpr (kType == DType::kF32) return reinterpret_cast<const float*>(p)[c];
  uint16_t h;
  std::memcpy(&h, p + 2 * c, 2);
  if constexpr (kType == DType::kF16) return f16_to_f32(h);
  return bf16_to_f32(h);
}

// R rows × O outputs starting at (r0, o0).
template <DType kType, int R, int O>
HWY_NOINLINE void tile(const Job& job, int64_t r0, int64_t o0) {
  // The fixed-size loops below are fully unrolled so the R×O accumulators and
  // the O weight-vector pairs live in registers.
  const DF df;
  const size_t n = hn::Lanes(df);
  const size_t block_bytes = 2 * n * dtype_size(kType);
  VF acc[R][O];
  const uint8_t* wrow[O];
  const float* xrow[R];
#pragma GCC unroll 16
  for (int o = 0; o < O; ++o) wrow[o] = job.w + (o0 + o) * job.w_row_bytes;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xrow[r] = job.x + (r0 + r) * job.x_stride;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = hn::Zero(df);

  for (int64_t b = 0; b < job.blocks; ++b) {
    VF w0[O], w1[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      hwy::Prefetch(wrow[o] + (b + kPrefetchBlocks) * block_bytes);
      load_block<kType>(wrow[o], b, w0[o], w1[o]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const VF x0 = hn::LoadU(df, xrow[r] + 2 * n * b);
      const VF x1 = hn::LoadU(df, xrow[r] + 2 * n * b + n);
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) {
        acc[r][o] = hn::MulAdd(w0[o], x0, acc[r][o]);
        acc[r][o] = hn::MulAdd(w1[o], x1, acc[r][o]);
      }
    }
  }

  const int64_t tail_begin = job.blocks * 2 * static_cast<int64_t>(n);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const float* xo = job.x_orig + (r0 + r) * job.cols;
    float* yr = job.y + (r0 + r) * job.y_stride;
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[r][o]));
      for (int64_t c = tail_begin; c < job.cols; ++c) sum += weight_at<kType>(wrow[o], c) * xo[c];
      if (job.bias) sum += job.bias[o0 + o];
      yr[o0 + o] = sum;
    }
  }
}

using TileFn = void (*)(const Job&, int64_t, int64_t);

template <DType kType, int R, size_t... Os>
constexpr std::array<TileFn, sizeof...(Os)> tile_row(std::index_sequence<Os...>) {
  return {&tile<kType, R, static_cast<int>(Os) + 1>...};
}

template <DType kType>
struct TileTable {
  // fns[R-1][O-1]; decode rows (R = 1) go up to kDecodeOuts outputs.
  std::array<std::array<TileFn, kTableOuts>, kMaxRows> fns;
  template <size_t... Rs>
  static constexpr std::array<std::array<TileFn, kTableOuts>, kMaxRows> make(std::index_sequence<Rs...>) {
    return {tile_row<kType, static_cast<int>(Rs) + 1>(std::make_index_sequence<kTableOuts>())...};
  }
  TileTable() : fns(make(std::make_index_sequence<kMaxRows>())) {}
};

template <DType kType>
void run_outputs(const Job& job, int64_t n_rows, int64_t o_begin, int64_t o_end) {
  static const TileTable<kType> table;
  if (n_rows == 1) {
    for (int64_t o = o_begin; o < o_end; o += kDecodeOuts) {
      const int64_t oo = std::min<int64_t>(kDecodeOuts, o_end - o);
      table.fns[0][oo - 1](job, 0, o);
    }
    return;
  }
  // Output blocks whose weights stay in L2 while every group of rows passes over
  // them; within a block a row group's activations stay in L1.
  int64_t block = static_cast<int64_t>((256 * 1024) / std::max<size_t>(1, job.w_row_bytes));
  block = std::max<int64_t>(kMaxOuts, block / kMaxOuts * kMaxOuts);
  for (int64_t ob = o_begin; ob < o_end; ob += block) {
    const int64_t ob_end = std::min(o_end, ob + block);
    for (int64_t r = 0; r < n_rows; r += kMaxRows) {
      const int64_t rr = std::min<int64_t>(kMaxRows, n_rows - r);
      // A lone last row (5 = 4 + 1) takes the decode tile: a 1×kMaxOuts tile has too
      // few independent accumulators to keep the FMA units busy.
      const int64_t outs = rr == 1 ? kDecodeOuts : kMaxOuts;
      for (int64_t o = ob; o < ob_end; o += outs) {
        const int64_t oo = std::min<int64_t>(outs, ob_end - o);
        table.fns[rr - 1][oo - 1](job, r, o);
      }
    }
  }
}

// Output rows [o_begin, o_end) of y = x W^T (+ bias) on the calling thread when
// `threads` is false, else every output row split over the pool.
void MatmulOutputs(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias,
                   int64_t o_begin, int64_t o_end, bool threads) {
  const DF df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  Job job;
  job.dtype = w.dtype;
  job.w = static_cast<const uint8_t*>(w.data);
  job.w_row_bytes = static_cast<size_t>(w.cols) * dtype_size(w.dtype);
  job.cols = w.cols;
  job.blocks = w.cols / (2 * n);
  job.x_orig = x;
  job.y = y;
  job.y_stride = w.rows;
  job.bias = bias;

  // BF16: de-interleave each 2·N block into [even elements | odd elements].
  thread_local std::vector<float> prepared;
  if (w.dtype == DType::kBF16 && job.blocks > 0) {
    const int64_t stride = job.blocks * 2 * n;
    prepared.resize(static_cast<size_t>(stride * n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* src = x + r * w.cols;
      float* dst = prepared.data() + r * stride;
      for (int64_t b = 0; b < job.blocks; ++b)
        for (int64_t j = 0; j < n; ++j) {
          dst[2 * n * b + j] = src[2 * n * b + 2 * j];
          dst[2 * n * b + n + j] = src[2 * n * b + 2 * j + 1];
        }
    }
    job.x = prepared.data();
    job.x_stride = stride;
  } else {
    job.x = x;
    job.x_stride = w.cols;
  }

  void (*run)(const Job&, int64_t, int64_t, int64_t) =
      w.dtype == DType::kF32   ? &run_outputs<DType::kF32>
      : w.dtype == DType::kF16 ? &run_outputs<DType::kF16>
                               : &run_outputs<DType::kBF16>;
  const size_t grain = n_rows == 1 ? kDecodeOuts : kMaxOuts;
  // Small problems are not worth waking the pool.
  const double work = static_cast<double>(w.rows) * w.cols * n_rows;
  if (!threads || work < 64 * 1024) {
    run(job, n_rows, o_begin, o_end);
    return;
  }
  parallel_for(
      static_cast<size_t>(w.rows),
      [&](size_t begin, size_t end, int) { run(job, n_rows, begin, end); }, grain);
}

void MatmulImpl(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias) {
  MatmulOutputs(w, x, n_rows, y, bias, 0, w.rows, true);
}

void MatmulOutputsImpl(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, int64_t o_begin,
                       int64_t o_end) {
  MatmulOutputs(w, x, n_rows, y, nullptr, o_begin, o_end, false);
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(MatmulImpl);
HWY_EXPORT(MatmulOutputsImpl);
HWY_EXPORT(TargetNameImpl);

// Quantized weights: the activations are quantized once (by the calling thread),
// then the output rows are split over the pool (threads) or run on this thread
// (rows [o_begin, o_end)); every format's matmul reads them.
static void quantized_matmul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias,
                             int64_t o_begin = 0, int64_t o_end = -1, bool threads = true) {
  const WeightFormat* format = weight_format(w.dtype);
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> scale, sum;
  const int64_t stride = quantized_rows_stride(w.cols);
  q.resize(static_cast<size_t>(n_rows * w.cols));
  scale.resize(static_cast<size_t>(n_rows * stride));
  sum.resize(static_cast<size_t>(n_rows * stride));
  QuantMatmulJob job;
  quantize_rows(x, n_rows, w.cols, q.data(), scale.data(), sum.data(), job.x);
  job.w = static_cast<const uint8_t*>(w.data);
  job.w_row_bytes = dtype_row_bytes(w.dtype, w.cols);
  job.cols = w.cols;
  job.y = y;
  job.y_stride = w.rows;
  job.bias = bias;
  const double work = static_cast<double>(w.rows) * w.cols * n_rows;
  if (!threads || work < 64 * 1024) {
    format->matmul(job, o_begin, o_end < 0 ? w.rows : o_end);
    return;
  }
  parallel_for(
      static_cast<size_t>(w.rows), [&](size_t begin, size_t end, int) { format->matmul(job, begin, end); }, 8);
}

void matmul_outputs(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, int64_t o_begin, int64_t o_end) {
  if (n_rows <= 0 || o_end <= o_begin) return;
  if (o_begin < 0 || o_end > w.rows)
    fail(ErrorKind::kInternal, "matmul_outputs: rows [{}, {}) of a {}-row matrix", o_begin, o_end, w.rows);
  if (is_quantized(w.dtype)) return quantized_matmul(w, x, n_rows, y, nullptr, o_begin, o_end, false);
  HWY_DYNAMIC_DISPATCH(MatmulOutputsImpl)(w, x, n_rows, y, o_begin, o_end);
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias) {
  if (n_rows <= 0 || w.rows <= 0) return;
  if (is_quantized(w.dtype)) return quantized_matmul(w, x, n_rows, y, bias);
  HWY_DYNAMIC_DISPATCH(MatmulImpl)(w, x, n_rows, y, bias);
}

const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

}  // namespace nextn
#endif  // HWY_ONCE
