// kernels/matmul.cc — y = x · Wᵀ (+ bias) for F32/F16/BF16 weights, float32 activations.
//
// One register-blocked tile kernel serves every batch size: a tile computes
// R rows × O outputs, loading each weight vector once and using it for all R
// rows, so k rows cost far less than k decode calls. Every tile streams several
// weight rows at once (8 for decode, 6–8 for batches on 32-register targets): the
// memory system needs that many streams in flight to reach its bandwidth.
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
// 2·N block once per call to match. On CPUs with AVX512_BF16 (the AVX3_ZEN4 target,
// kernels/cpu_extras.h) BF16 weights instead meet activations rounded to bf16 once per
// call, in the bf16 dot product vdpbf16ps: 32 multiply-adds per instruction and no
// widening, half the instructions of the float path, which is what a verify batch's
// rows cost on top of streaming the weights (llama.cpp rounds activations for BF16
// weights the same way).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"

#include <algorithm>
#include <atomic>
#include <array>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cpu_extras.h"
#include "kernels/kernels.h"
#include "kernels/tiling.h"
#include "kernels/weight_format.h"
#include "util/error.h"
#include "util/thread_pool.h"

#ifndef NEXTN_KERNELS_MATMUL_ONCE  // not per target
#define NEXTN_KERNELS_MATMUL_ONCE
namespace nextn {
// Below this many multiply-adds a matmul runs on the calling thread: waking the pool costs more.
constexpr double kPoolWork = 64 * 1024;

// matmul_each's matrices with their outputs laid end to end, each at a multiple of
// `align` (so the pool's chunks of `align` outputs never cut one's groups), over the pool,
// or on this thread below kPoolWork multiply-adds in all. Part carries a matrix's job.
template <class Part>
struct EndToEnd {
  struct Placed {
    Part part;
    int64_t offset, rows;
  };
  int64_t align;
  std::vector<Placed> placed;
  int64_t total = 0;
  double work = 0;

  explicit EndToEnd(int64_t a) : align(a) {}
  void add(const Part& part, const WeightMatrix& w, int64_t n_rows) {
    placed.push_back({part, total, w.rows});
    total += (w.rows + align - 1) / align * align;
    work += static_cast<double>(w.rows) * w.cols * n_rows;
  }
  // run(part, begin, end) for each part's own output range.
  template <class Run>
  void run(const Run& run) const {
    auto range = [&](size_t begin, size_t end, int) {
      for (const Placed& p : placed) {
        const int64_t lo = std::max<int64_t>(static_cast<int64_t>(begin), p.offset);
        const int64_t hi = std::min<int64_t>(static_cast<int64_t>(end), p.offset + p.rows);
        if (lo < hi) run(p.part, lo - p.offset, hi - p.offset);
      }
    };
    if (work < kPoolWork) return range(0, static_cast<size_t>(total), 0);
    parallel_for(static_cast<size_t>(total), range, static_cast<size_t>(align));
  }
};
}  // namespace nextn
#endif

// The bf16 dot product (NEXTN_X86_BF16_DOT): Highway 1.0.3's AVX3_DL target does not
// enable AVX512_BF16, so the tile that uses it carries the feature itself and runs only
// where avx512_bf16().
#include "kernels/x86_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Tile shapes: the R×O accumulators, R activation vectors, a weight vector or two and
// the BF16 mask must fit the register file. The tile multiplies one half-block of
// weights at a time, so only one weight vector is live and O can be as wide as the
// accumulators allow: 32 registers take 1–3 rows × 8 outputs and 4 × 6, 16 registers
// 1 × 8, 2 × 5 and 3 × 3. Measured (2026-12-03, 2 threads, 512 MB BF16 matrix): 3 and 4
// rows 10–15 % faster than 4-output tiles on AVX3_DL; decode 15 % faster on AVX2.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM_A64
constexpr int kMaxRows = 4;  // 32 vector registers
constexpr int tile_outs(int rows) { return rows <= 3 ? 8 : 6; }
#else
constexpr int kMaxRows = 3;  // 16 vector registers
constexpr int tile_outs(int rows) { return rows == 1 ? 8 : rows == 2 ? 5 : 3; }
#endif
constexpr int kTableOuts = 8;  // ≥ every tile_outs()
constexpr int64_t kPrefetchBlocks = 8;  // weight prefetch distance, in 2·N-column blocks

struct Job {
  DType dtype;
  const uint8_t* w;     // weight base
  size_t w_row_bytes;   // bytes per weight row
  int64_t cols;
  int64_t blocks;       // full 2·N-column blocks
  const float* x;       // prepared activations, row stride x_stride
  const uint16_t* xh;   // or, for the bf16 dot, the activations rounded to bf16 [rows, cols]
  int64_t x_stride;
  const float* x_orig;  // original activations (scalar tail), row stride cols
  float* y;
  int64_t y_stride;
  const float* bias;
};

// Loads half h of block b of weight row p: elements [2·N·b + h·N, 2·N·b + (h+1)·N), or
// for BF16 the even (h = 0) / odd (h = 1) elements of the block's 2·N.
template <DType kType>
HWY_INLINE VF load_half(const uint8_t* p, int64_t b, int h) {
  const DF df;
  const size_t n = hn::Lanes(df);
  if constexpr (kType == DType::kF32) {
    return hn::LoadU(df, reinterpret_cast<const float*>(p) + 2 * n * b + h * n);
  } else if constexpr (kType == DType::kF16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p) + 2 * n * b + h * n));
  } else {
    const hn::RebindToUnsigned<DF> du;
    const auto u = hn::LoadU(du, reinterpret_cast<const uint32_t*>(p) + n * b);
    return h == 0 ? hn::BitCast(df, hn::ShiftLeft<16>(u))                   // elements 2j
                  : hn::BitCast(df, hn::And(u, hn::Set(du, 0xFFFF0000u)));  // elements 2j+1
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

// Prefetches for block b of weight row `row` in a tile of O rows: the same row kPrefetchBlocks
// blocks ahead into L1, and the same block of the next tile's row (rows are contiguous:
// O rows further) into L2. A row is short (2 KiB at 1024 BF16 columns), so without the
// second, every tile started its rows cold; with it the next tile's lines are on their way
// while this one computes, which is what lets a verify batch's extra arithmetic overlap the
// streaming (Qwen3-0.6B BF16 on AVX3_ZEN4: decode and 4-row verify 5–10 % faster).
HWY_INLINE void prefetch(const Job& job, const uint8_t* row, int O, int64_t b, size_t block_bytes) {
  hwy::Prefetch(row + (b + kPrefetchBlocks) * block_bytes);
  __builtin_prefetch(row + O * job.w_row_bytes + b * block_bytes, 0, 1);  // locality 1: L2
}

// R rows × O outputs starting at (r0, o0).
template <DType kType, int R, int O>
HWY_NOINLINE void tile(const Job& job, int64_t r0, int64_t o0) {
  // The fixed-size loops below are fully unrolled so the R×O accumulators and
  // the R activation vectors live in registers.
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

  // Per block, each accumulator takes the first half's product and then the second's,
  // whatever R and O: the order that makes every tile's sums identical.
  for (int64_t b = 0; b < job.blocks; ++b) {
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) prefetch(job, wrow[o], O, b, block_bytes);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      VF x[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) x[r] = hn::LoadU(df, xrow[r] + 2 * n * b + h * n);
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) {
        const VF w = load_half<kType>(wrow[o], b, h);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][o] = hn::MulAdd(w, x[r], acc[r][o]);
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

#if NEXTN_X86_BF16_DOT
// R rows × O outputs with the bf16 dot product: vdpbf16ps adds to each 32-bit lane the two
// products of the bf16 pair it holds (columns 2j and 2j+1), so weights and activations
// stay in their stored order, 32 columns per vector. The same per-(row, output) order
// whatever the tile, as in tile().
template <int R, int O>
HWY_NOINLINE NEXTN_X86_BF16_DOT_ATTR void dot_tile(const Job& job, int64_t r0, int64_t o0) {
  constexpr int64_t kCols = 32;  // per vector
  Bf16Acc acc[R][O];
  const uint8_t* wrow[O];
  const uint16_t* xrow[R];
#pragma GCC unroll 16
  for (int o = 0; o < O; ++o) wrow[o] = job.w + (o0 + o) * job.w_row_bytes;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xrow[r] = job.xh + (r0 + r) * job.cols;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = bf16_zero();

  for (int64_t b = 0; b < job.blocks; ++b) {
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) prefetch(job, wrow[o], O, b, 2 * kCols);
    Bf16Pairs x[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) x[r] = load_bf16x32(xrow[r] + kCols * b);
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      const Bf16Pairs w = load_bf16x32(wrow[o] + 2 * kCols * b);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][o] = bf16_dot_add(acc[r][o], w, x[r]);
    }
  }

  const int64_t tail_begin = job.blocks * kCols;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* yr = job.y + (r0 + r) * job.y_stride;
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      float sum = bf16_sum(acc[r][o]);
      for (int64_t c = tail_begin; c < job.cols; ++c)
        sum += weight_at<DType::kBF16>(wrow[o], c) * bf16_to_f32(xrow[r][c]);
      if (job.bias) sum += job.bias[o0 + o];
      yr[o0 + o] = sum;
    }
  }
}

// Row-major float32 activations to bf16, nearest even (vcvtne2ps2bf16 for whole vectors,
// f32_to_bf16 for the rest of a row: the same rounding apart from subnormals, which the
// instruction flushes to zero).
NEXTN_X86_BF16_DOT_ATTR void round_to_bf16(const float* x, int64_t n_rows, int64_t cols, uint16_t* out) {
  constexpr int64_t kCols = 32;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* src = x + r * cols;
    uint16_t* dst = out + r * cols;
    int64_t c = 0;
    for (; c + kCols <= cols; c += kCols) round32_to_bf16(src + c, dst + c);
    for (; c < cols; ++c) dst[c] = f32_to_bf16(src[c]);
  }
}
#endif

using TileFn = void (*)(const Job&, int64_t, int64_t);

// Only the tiles run_outputs uses are instantiated (the rest stay null). kDot: the bf16
// dot tiles (kType BF16).
template <DType kType, bool kDot, int R, int O>
constexpr TileFn tile_or_null() {
  if constexpr (O > tile_outs(R)) return nullptr;
#if NEXTN_X86_BF16_DOT
  else if constexpr (kDot) return &dot_tile<R, O>;
#endif
  else return &tile<kType, R, O>;
}

template <DType kType, bool kDot, int R, size_t... Os>
constexpr std::array<TileFn, sizeof...(Os)> tile_row(std::index_sequence<Os...>) {
  return {tile_or_null<kType, kDot, R, static_cast<int>(Os) + 1>()...};
}

template <DType kType, bool kDot>
struct TileTable {
  // fns[R-1][O-1] for O ≤ tile_outs(R).
  std::array<std::array<TileFn, kTableOuts>, kMaxRows> fns;
  template <size_t... Rs>
  static constexpr std::array<std::array<TileFn, kTableOuts>, kMaxRows> make(std::index_sequence<Rs...>) {
    return {tile_row<kType, kDot, static_cast<int>(Rs) + 1>(std::make_index_sequence<kTableOuts>())...};
  }
  TileTable() : fns(make(std::make_index_sequence<kMaxRows>())) {}
};

template <DType kType, bool kDot = false>
void run_outputs(const Job& job, int64_t n_rows, int64_t o_begin, int64_t o_end) {
  static const TileTable<kType, kDot> table;
  constexpr int64_t kUnit = 24;  // outputs of an L2 block; the 8-, 6- and 3-wide tiles divide it
  for_each_tile(n_rows, o_begin, o_end, job.w_row_bytes, kMaxRows, kUnit, tile_outs, [&](int64_t r, int rows) {
    return [&, r, rows](int64_t o, int64_t outs) { table.fns[rows - 1][outs - 1](job, r, o); };
  });
}

// Whether BF16 weights take the bf16 dot product on this target and CPU.
bool bf16_dot() {
#if NEXTN_X86_BF16_DOT
  return avx512_bf16();
#else
  return false;
#endif
}

using RunFn = void (*)(const Job&, int64_t, int64_t, int64_t);

// The job of y = x W^T (+ bias), its activations prepared for w's type in this thread's
// buffers (valid until its next call), and the function that runs its outputs. `reuse`:
// this thread's last call prepared the same x for a matrix of the same type and width, so
// the buffers are taken as they are.
RunFn prepare(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias, Job& job,
              bool reuse = false) {
  const DF df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  job.dtype = w.dtype;
  job.w = static_cast<const uint8_t*>(w.data);
  job.w_row_bytes = static_cast<size_t>(w.cols) * dtype_size(w.dtype);
  job.cols = w.cols;
  job.blocks = w.cols / (2 * n);
  job.x_orig = x;
  job.y = y;
  job.y_stride = w.rows;
  job.bias = bias;

  job.x = x;
  job.x_stride = w.cols;
  job.xh = nullptr;
  RunFn run = w.dtype == DType::kF32   ? &run_outputs<DType::kF32>
              : w.dtype == DType::kF16 ? &run_outputs<DType::kF16>
                                       : &run_outputs<DType::kBF16>;
#if NEXTN_X86_BF16_DOT
  // BF16 with the dot product: the activations rounded to bf16.
  thread_local std::vector<uint16_t> rounded;
  if (w.dtype == DType::kBF16 && bf16_dot()) {
    if (!reuse) {
      rounded.resize(static_cast<size_t>(n_rows * w.cols));
      round_to_bf16(x, n_rows, w.cols, rounded.data());
    }
    job.xh = rounded.data();
    job.x = nullptr;
    return &run_outputs<DType::kBF16, true>;
  }
#endif
  // BF16 otherwise: each 2·N block de-interleaved into [even elements | odd elements].
  thread_local std::vector<float> prepared;
  if (w.dtype == DType::kBF16 && job.blocks > 0) {
    const int64_t stride = job.blocks * 2 * n;
    if (!reuse) {
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
    }
    job.x = prepared.data();
    job.x_stride = stride;
  }
  return run;
}

constexpr size_t kGrain = 24;  // outputs per work item, as kUnit in run_outputs

// Output rows [o_begin, o_end) of y = x W^T (+ bias) on the calling thread when
// `threads` is false, else every output row split over the pool.
void MatmulOutputs(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias,
                   int64_t o_begin, int64_t o_end, bool threads) {
  Job job;
  const RunFn run = prepare(w, x, n_rows, y, bias, job);
  const double work = static_cast<double>(w.rows) * w.cols * n_rows;
  if (!threads || work < kPoolWork) {
    run(job, n_rows, o_begin, o_end);
    return;
  }
  parallel_for(
      static_cast<size_t>(w.rows), [&](size_t begin, size_t end, int) { run(job, n_rows, begin, end); }, kGrain);
}

// matmul_each for float matrices of one type and width: activations prepared once, one
// pool pass over every matrix's outputs laid end to end (each at a multiple of kGrain).
void MatmulEachImpl(const MatmulOutput* outputs, size_t count, const float* x, int64_t n_rows) {
  struct Part {
    Job job;
    RunFn run;
  };
  EndToEnd<Part> parts(kGrain);
  for (size_t i = 0; i < count; ++i) {
    Part part{};
    part.run = prepare(*outputs[i].w, x, n_rows, outputs[i].y, outputs[i].bias, part.job, i > 0);
    parts.add(part, *outputs[i].w, n_rows);
  }
  parts.run([n_rows](const Part& part, int64_t begin, int64_t end) { part.run(part.job, n_rows, begin, end); });
}

void MatmulImpl(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias) {
  MatmulOutputs(w, x, n_rows, y, bias, 0, w.rows, true);
}

void MatmulOutputsImpl(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, int64_t o_begin,
                       int64_t o_end) {
  MatmulOutputs(w, x, n_rows, y, nullptr, o_begin, o_end, false);
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }
bool Bf16DotImpl() { return bf16_dot(); }

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {

HWY_EXPORT(MatmulImpl);
HWY_EXPORT(MatmulOutputsImpl);
HWY_EXPORT(MatmulEachImpl);
HWY_EXPORT(TargetNameImpl);
HWY_EXPORT(Bf16DotImpl);

// Quantized weights: the activations are quantized once (by the calling thread), then
// the output rows are split over the pool (threads) or run on this thread (rows
// [o_begin, o_end)); every format's matmul reads them. The buffers are the calling
// thread's, valid until its next call.
static QuantizedRows quantize_activations(const float* x, int64_t n_rows, int64_t cols) {
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> scale, sum;
  thread_local std::vector<int32_t> qsum;
  const int64_t stride = quantized_rows_stride(cols);
  q.resize(static_cast<size_t>(n_rows * cols));
  scale.resize(static_cast<size_t>(n_rows * stride));
  sum.resize(static_cast<size_t>(n_rows * stride));
  qsum.resize(static_cast<size_t>(2 * n_rows * stride));
  QuantizedRows rows;
  quantize_rows(x, n_rows, cols, q.data(), scale.data(), sum.data(), qsum.data(), rows);
  return rows;
}

// A distinct id per quantized input (QuantMatmulJob::id): the tiles' packed rows are
// reused for every matrix applied to it.
static uint64_t next_input_id() {
  static std::atomic<uint64_t> calls{0};
  return ++calls;
}

static QuantMatmulJob quantized_job(const WeightMatrix& w, const QuantizedRows& x, float* y, const float* bias,
                                    uint64_t id) {
  QuantMatmulJob job;
  job.x = x;
  job.w = static_cast<const uint8_t*>(w.data);
  job.w_row_bytes = dtype_row_bytes(w.dtype, w.cols);
  job.cols = w.cols;
  job.y = y;
  job.y_stride = w.rows;
  job.bias = bias;
  job.id = id;
  return job;
}

static void quantized_matmul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias,
                             int64_t o_begin = 0, int64_t o_end = -1, bool threads = true) {
  const WeightFormat* format = weight_format(w.dtype);
  const QuantMatmulJob job = quantized_job(w, quantize_activations(x, n_rows, w.cols), y, bias, next_input_id());
  const double work = static_cast<double>(w.rows) * w.cols * n_rows;
  if (!threads || work < kPoolWork) {
    format->matmul(job, o_begin, o_end < 0 ? w.rows : o_end);
    return;
  }
  parallel_for(
      static_cast<size_t>(w.rows), [&](size_t begin, size_t end, int) { format->matmul(job, begin, end); },
      static_cast<size_t>(std::max(8, format->group_rows)));
}

void matmul_each(std::span<const MatmulOutput> outputs, const float* x, int64_t n_rows) {
  if (n_rows <= 0 || outputs.empty()) return;
  // Shared: all quantized (one int8 quantization serves every format), or all one float type.
  const WeightMatrix& first = *outputs[0].w;
  bool quantized = outputs.size() > 1, same_float = outputs.size() > 1 && !is_quantized(first.dtype);
  for (const MatmulOutput& out : outputs) {
    quantized = quantized && is_quantized(out.w->dtype) && out.w->cols == first.cols;
    same_float = same_float && out.w->dtype == first.dtype && out.w->cols == first.cols;
  }
  if (same_float) return HWY_DYNAMIC_DISPATCH(MatmulEachImpl)(outputs.data(), outputs.size(), x, n_rows);
  if (!quantized) {
    for (const MatmulOutput& out : outputs) matmul(*out.w, x, n_rows, out.y, out.bias);
    return;
  }
  const QuantizedRows rows = quantize_activations(x, n_rows, outputs[0].w->cols);
  const uint64_t id = next_input_id();
  struct Part {
    const WeightFormat* format;
    QuantMatmulJob job;
  };
  EndToEnd<Part> parts(16);  // every format's group of rows divides it
  for (const MatmulOutput& out : outputs) {
    const WeightFormat* format = weight_format(out.w->dtype);
    if (parts.align % std::max(1, format->group_rows) != 0)
      fail(ErrorKind::kInternal, "matmul_each: {} groups {} rows", dtype_name(out.w->dtype), format->group_rows);
    parts.add({format, quantized_job(*out.w, rows, out.y, out.bias, id)}, *out.w, n_rows);
  }
  parts.run([](const Part& part, int64_t begin, int64_t end) { part.format->matmul(part.job, begin, end); });
}

void matmul_outputs(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, int64_t o_begin, int64_t o_end) {
  if (n_rows <= 0 || o_end <= o_begin) return;
  if (o_begin < 0 || o_end > w.rows)
    fail(ErrorKind::kInternal, "matmul_outputs: rows [{}, {}) of a {}-row matrix", o_begin, o_end, w.rows);
  if (is_quantized(w.dtype)) {
    const int64_t group = weight_format(w.dtype)->group_rows;
    if (o_begin % group != 0 || (o_end % group != 0 && o_end != w.rows))
      fail(ErrorKind::kInternal, "matmul_outputs: rows [{}, {}) cut {}'s groups of {} rows", o_begin, o_end,
           dtype_name(w.dtype), group);
    return quantized_matmul(w, x, n_rows, y, nullptr, o_begin, o_end, false);
  }
  HWY_DYNAMIC_DISPATCH(MatmulOutputsImpl)(w, x, n_rows, y, o_begin, o_end);
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias) {
  if (n_rows <= 0 || w.rows <= 0) return;
  if (is_quantized(w.dtype)) return quantized_matmul(w, x, n_rows, y, bias);
  HWY_DYNAMIC_DISPATCH(MatmulImpl)(w, x, n_rows, y, bias);
}

bool bf16_activations() { return HWY_DYNAMIC_DISPATCH(Bf16DotImpl)(); }

const char* simd_target_name() { return extend_target_name(HWY_DYNAMIC_DISPATCH(TargetNameImpl)()); }

}  // namespace nextn
#endif  // HWY_ONCE
