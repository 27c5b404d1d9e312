// kernels/interleaved-inl.h — the matmul shared by the interleaved layouts (Q8_0x16,
// Q4_0x16, Q4_Kx16, Q6_Kx16), compiled once per SIMD target (include it after hwy/highway.h from a
// layout file).
//
// A layout stores 16 weight rows together (a group): in each block of kElems columns, the
// same 4 columns of the 16 rows are 64 consecutive bytes (a chunk, row o at bytes 4o..4o+3),
// so one 512-bit vector holds them. A 4-byte broadcast of the activations multiplies a
// chunk into one int32 lane per output row (VNNI vpdpbusd: unsigned weight bytes × signed
// activations, summed over the 4). A unit of kUnitElems columns (a format's sub-block)
// sums its chunks in integers, then takes one float step per activation row for 16
// outputs: acc += (float(dot) · activation scale) · unit_scale, plus, for formats with
// minimums, acc += unit_min · (activation scale · Σq). A lane never mixes two outputs, so
// nothing is reduced across lanes, and every row of a batch reuses the weight vectors in
// registers; the file layouts pay a float step per 32 weights, activation row and output.
//
// A layout L supplies:
//   kElems, kBlockBytes: columns and bytes of a block of a group (16 rows);
//   kUnits, kUnitElems: units per block and their columns (16 or 32: one activation block
//     of 32 holds one or two units);
//   kOffset: the unit's chunk bytes are value + kOffset (Q8_0 stores q + 128, Q6_K its q of
//     0..63 for q − 32), taken back off through the integer sum's start, −kOffset·Σq;
//   kMaxValue: the largest stored byte (how many chunks int16 sums can hold, without VNNI);
//   kHasMin;
//   kStep: units whose bytes are addressed together (Q6_K: 2, the nibbles of a pair), run in
//     one pass of the unit loop so that their offsets are constants;
//   chunk(block, u, c, lane0): chunk c of unit u, the lanes of rows lane0.. (unpacked bytes);
//   unit_scale(block, u, lane0) and, with kHasMin, unit_min(block, u, lane0): per-row
//     floats of the unit;
//   and for the scalar code: value(block, u, i, o) (byte of column i of the unit, row o,
//     kOffset included), scale_at(block, u, o), min_at(block, u, o).
//
// The integer sums are exact, and every target runs the same float operations per output
// (the scalar code through std::fma), so a row's result is the same bits whatever its
// batch, its thread split or the SIMD target. Without VNNI (AVX3, AVX2) the integers come
// from vpmaddubsw + vpmaddwd: unsigned values below 128 go in as they are; Q8_0's bytes,
// which would overflow vpmaddubsw's pairs, go in as |q| with q's sign moved onto the
// activation.
#ifndef NEXTN_KERNELS_INTERLEAVED_ROWS_H_  // once, not per target: rows and repacking
#define NEXTN_KERNELS_INTERLEAVED_ROWS_H_
#include <cstring>

#include "kernels/weight_format.h"

namespace nextn {

// Row `row` of an interleaved matrix through its layout's bytes B: scale·(value − offset)
// (+ min), which is each file format's own dequantizer, rounding for rounding.
template <class B, DType kLayout>
void dequantize_interleaved_row(const uint8_t* data, int64_t cols, int64_t row, float* out) {
  const uint8_t* group = data + row / 16 * 16 * dtype_row_bytes(kLayout, cols);
  const int o = static_cast<int>(row % 16);
  for (int64_t b = 0; b < cols / B::kElems; ++b) {
    const uint8_t* block = group + b * B::kBlockBytes;
    for (int u = 0; u < B::kUnits; ++u)
      for (int i = 0; i < B::kUnitElems; ++i) {
        float x = B::scale_at(block, u, o) * static_cast<float>(B::value(block, u, i, o) - B::kOffset);
        if constexpr (B::kHasMin) x += B::min_at(block, u, o);
        out[B::kElems * b + B::kUnitElems * u + i] = x;
      }
  }
}

// rows × cols of kFile blocks (rows a multiple of 16) rewritten as kLayout: B::put writes
// row o's bytes of a group's block (all of them) from the file's block.
template <class B, DType kFile, DType kLayout>
void repack_interleaved(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  const size_t file_row = dtype_row_bytes(kFile, cols), layout_row = dtype_row_bytes(kLayout, cols);
  const int file_block = dtype_info(kFile).block_bytes;
  for (int64_t g = 0; g < rows / 16; ++g)
    for (int64_t b = 0; b < cols / B::kElems; ++b) {
      uint8_t* block = dst + g * 16 * layout_row + b * B::kBlockBytes;
      for (int o = 0; o < 16; ++o) B::put(block, o, src + (g * 16 + o) * file_row + b * file_block);
    }
}

}  // namespace nextn
#endif  // NEXTN_KERNELS_INTERLEAVED_ROWS_H_

#if defined(NEXTN_KERNELS_INTERLEAVED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NEXTN_KERNELS_INTERLEAVED_INL_H_
#undef NEXTN_KERNELS_INTERLEAVED_INL_H_
#else
#define NEXTN_KERNELS_INTERLEAVED_INL_H_
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "hwy/cache_control.h"
#include "kernels/cpu_extras.h"
#include "kernels/tiling.h"
#include "kernels/weight_format.h"
#include "kernels/x86_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

constexpr int kGroupRows = 16;   // rows per group

#undef NEXTN_INTERLEAVED_SIMD
#if NEXTN_X86_BYTE_TILES
#define NEXTN_INTERLEAVED_SIMD 1
using VI = TileI;
using VF = TileF;
constexpr int kLanes = kTileLanes;
#if HWY_TARGET == HWY_AVX2
constexpr int kMaxRows = 3;  // 16 registers (2 rows a pass measured no faster on AVX2, prefill slower)
constexpr int tile_vecs(int) { return 2; }  // one group: 2 vectors
#else
constexpr int kMaxRows = 8;
constexpr int tile_vecs(int) { return 1; }
#endif
constexpr int kVecsPerGroup = kGroupRows / kLanes;

// Whether a tile multiplies bytes with VNNI's vpdpbusd: always on AVX3_DL; on AVX2 the
// tiles come in two sets, kV choosing AVX-VNNI's (kernels/cpu_extras.h).
template <bool kV>
constexpr bool kDotVnni = HWY_TARGET == HWY_AVX3_DL || (HWY_TARGET == HWY_AVX2 && kV);

// Q8_0's bytes (q + 128) without VNNI: q itself, and the form of the dot below.
template <class L, bool kV>
constexpr bool kSignedDot = L::kOffset == 128 && !kDotVnni<kV>;

// A chunk prepared once for every activation row.
struct Chunk {
  VI w;    // the bytes as the dot takes them: value + kOffset, or q (kSignedDot)
  VI mag;  // kSignedDot: |q| (−128 → 128 as an unsigned byte)
  SignOf sign;  // kSignedDot: where q < 0
};

template <class L, bool kV>
HWY_INLINE NEXTN_X86_VNNI_ATTR Chunk prepare(VI bytes) {
  Chunk c;
  if constexpr (kSignedDot<L, kV>) {
    c.w = xor_i(bytes, bytes_i(0x80));
    c.mag = abs_i8(c.w);
    c.sign = sign_of(c.w);
  } else {
    c.w = bytes;
  }
  return c;
}

// The unit's integer sum before its chunks, from the row's Σq per 16 columns at `halves`
// (the unit's first; the next 16 at halves[R]): −kOffset·Σq (none where kSignedDot takes q).
template <class L, bool kV, int R>
HWY_INLINE VI start(const int32_t* halves) {
  if constexpr (kSignedDot<L, kV> || L::kOffset == 0) return set_i(0);
  const int32_t sum = L::kUnitElems == 16 ? halves[0] : halves[0] + halves[R];
  return set_i(-L::kOffset * sum);
}

// The activations of a tile's R rows, interleaved row by row so that one pointer serves
// them all (with a pointer per row, R = 4 already spilled them): the 4 values of columns
// 4p.. of row r at q + 4(p·R + r), a 32-column block's scale and sum at [k·R + r], Σq of
// 16 columns at qsum[k·R + r]. For one row that is QuantizedRows' own layout.
struct TileRows {
  const int8_t* q;
  const float* scale;
  const float* sum;
  const int32_t* qsum;
};

// Rows [r0, r0 + R) (R > 1) of x as TileRows, packed into `buffer`.
inline TileRows pack_rows(const QuantizedRows& x, int64_t cols, int64_t r0, int R, std::vector<int32_t>& buffer) {
  const int64_t groups = cols / 4, blocks = cols / 32;
  buffer.resize(static_cast<size_t>(R * (groups + 4 * blocks)));
  int32_t* q = buffer.data();
  float* scale = reinterpret_cast<float*>(q + R * groups);
  float* sum = scale + R * blocks;
  int32_t* qsum = reinterpret_cast<int32_t*>(sum + R * blocks);
  for (int r = 0; r < R; ++r) {
    const int8_t* row = x.q + (r0 + r) * cols;
    for (int64_t p = 0; p < groups; ++p) std::memcpy(q + p * R + r, row + 4 * p, 4);
    for (int64_t k = 0; k < blocks; ++k) {
      scale[k * R + r] = x.scale[(r0 + r) * x.stride + k];
      sum[k * R + r] = x.sum[(r0 + r) * x.stride + k];
      qsum[2 * k * R + r] = x.qsum[(r0 + r) * 2 * x.stride + 2 * k];
      qsum[(2 * k + 1) * R + r] = x.qsum[(r0 + r) * 2 * x.stride + 2 * k + 1];
    }
  }
  return {reinterpret_cast<const int8_t*>(q), scale, sum, qsum};
}

// The job's rows [r0, r0 + R) as TileRows: one row is QuantizedRows' own layout; several
// are packed once per matmul call (job.id), tile and thread. The pool hands each thread
// several chunks of outputs, each visiting every row tile (tiling.h): packing the same
// rows again for each chunk cost ~0.6 ms of a 4-row verify of Qwen3-0.6B and 7 % of a
// 512-token prefill of the Qwen3.5-0.8B shape at Q4_K_M. Tiles start at multiples of
// kMaxRows.
inline TileRows tile_rows(const QuantMatmulJob& job, int64_t r0, int R) {
  const QuantizedRows& x = job.x;
  if (R == 1)
    return {x.q + r0 * job.cols, x.scale + r0 * x.stride, x.sum + r0 * x.stride, x.qsum + r0 * 2 * x.stride};
  struct Packed {
    uint64_t id = 0;
    std::vector<std::vector<int32_t>> buffers;  // by tile (r0 / kMaxRows)
    std::vector<TileRows> rows;
    std::vector<uint8_t> ready;
  };
  thread_local Packed p;
  const size_t tile = static_cast<size_t>(r0 / kMaxRows);
  if (job.id == 0 || p.id != job.id) {
    p.id = job.id;
    std::fill(p.ready.begin(), p.ready.end(), uint8_t{0});
  }
  if (p.buffers.size() <= tile) {
    p.buffers.resize(tile + 1);
    p.rows.resize(tile + 1);
    p.ready.resize(tile + 1, 0);
  }
  if (!p.ready[tile]) {
    p.rows[tile] = pack_rows(x, job.cols, r0, R, p.buffers[tile]);
    p.ready[tile] = job.id != 0;
  }
  return p.rows[tile];
}

#if NEXTN_X86_VNNI
// sum + Σ over each lane's 4 columns of w·x (x: the same 4 activations in every lane).
template <class L>
HWY_INLINE NEXTN_X86_VNNI_ATTR VI dot(VI sum, const Chunk& c, VI x) {
  return quad_dot_add(sum, c.w, x);
}
#else
// Without VNNI: the int16 pair sums of a chunk (vpmaddubsw), several chunks added in int16
// before one vpmaddwd widens them, as many as cannot overflow: 2·127·max value per pair
// and chunk (Q4: 8 chunks, Q6_K: 2; Q8_0's |q| up to 128: 1).
template <class L, bool kV>
constexpr int kInt16Chunks = kSignedDot<L, kV> ? 1 : 32767 / (2 * 127 * L::kMaxValue);

template <class L, bool kV>
HWY_INLINE VI pair_sums(const Chunk& c, VI x) {
  if constexpr (kSignedDot<L, kV>) x = apply_sign(x, c.sign);
  return maddubs_i(kSignedDot<L, kV> ? c.mag : c.w, x);
}
#endif

// How far ahead of a tile's block its rows are prefetched: whole blocks, about 4 KiB.
template <class L>
constexpr int kPrefetchBytes = std::max(1, 4096 / L::kBlockBytes) * L::kBlockBytes;

// Where vector v's lanes start within its group's rows.
constexpr int lane0(int v) { return (v % kVecsPerGroup) * kLanes; }

// R activation rows × NV vectors of outputs (NV / kVecsPerGroup whole groups) from (r0, o0).
// Every address inside a block is a constant offset from a pointer advanced once per
// block (the unit loop runs kStep units a pass with their offsets known at compile time):
// with offsets computed per unit, the scalar arithmetic outnumbered the vector work.
template <class L, int R, int NV, bool kV>
HWY_NOINLINE NEXTN_X86_VNNI_ATTR void interleaved_tile(const QuantMatmulJob& job, const TileRows& x, int64_t r0,
                                                          int64_t o0) {
  const int64_t blocks = job.cols / L::kElems;
  const size_t group_bytes = kGroupRows * job.w_row_bytes;
  const uint8_t* block[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) block[v] = job.w + (o0 / kGroupRows + v / kVecsPerGroup) * group_bytes;
  // The rows' activations at the block (TileRows).
  const int8_t* xq = x.q;
  const float* xs = x.scale;
  const float* xm = x.sum;
  const int32_t* xh = x.qsum;
  VF acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = zero_f();

  constexpr int kSteps = L::kUnits / L::kStep;
  constexpr int kLinesPerStep = (L::kBlockBytes + 64 * kSteps - 1) / (64 * kSteps);
  for (int64_t b = 0; b < blocks; ++b) {
    // One pass of kStep units at a time: unrolled over every unit, the compiler hoisted the
    // activation broadcasts of all of them and spilled them.
#pragma GCC unroll 1
    for (int s = 0; s < kSteps; ++s) {
      // The hardware prefetcher alone left decode waiting at each block's first load; each
      // pass prefetches its share of a block about 4 KiB ahead.
#pragma GCC unroll 8
      for (int v = 0; v < NV; v += kVecsPerGroup)
#pragma GCC unroll 8
        for (int line = 0; line < kLinesPerStep; ++line)
          hwy::Prefetch(block[v] + kPrefetchBytes<L> + (s * kLinesPerStep + line) * 64);
#pragma GCC unroll 4
      for (int j = 0; j < L::kStep; ++j) {
        const int u = s * L::kStep + j;
        const int e = u * L::kUnitElems;  // the unit's first column in the block
        VI sum[R][NV];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const VI first = start<L, kV, R>(xh + e / 16 * R + r);
#pragma GCC unroll 8
          for (int v = 0; v < NV; ++v) sum[r][v] = first;
        }
#if !NEXTN_X86_VNNI
        [[maybe_unused]] VI pairs[R][NV];  // int16 sums of up to kInt16Chunks chunks (without VNNI)
#endif
        // Each activation chunk is broadcast once for all NV vectors of the tile (AVX2: a
        // group's two halves), and each weight chunk is prepared once for all R rows.
        constexpr int kChunks = L::kUnitElems / 4;
#pragma GCC unroll 8
        for (int c = 0; c < kChunks; ++c) {
          Chunk w[NV];
#pragma GCC unroll 8
          for (int v = 0; v < NV; ++v) w[v] = prepare<L, kV>(L::chunk(block[v], u, c, lane0(v)));
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const VI xc = broadcast4(xq + (e + 4 * c) * R + 4 * r);
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) {
#if NEXTN_X86_VNNI
              sum[r][v] = dot<L>(sum[r][v], w[v], xc);
#else
              if constexpr (kDotVnni<kV>) {
                sum[r][v] = quad_dot_add_avx_vnni(sum[r][v], w[v].w, xc);
              } else {
                const VI p = pair_sums<L, kV>(w[v], xc);
                pairs[r][v] = c % kInt16Chunks<L, kV> == 0 ? p : add_i16(pairs[r][v], p);
                if (c % kInt16Chunks<L, kV> == kInt16Chunks<L, kV> - 1 || c == kChunks - 1)
                  sum[r][v] = widen_add(sum[r][v], pairs[r][v]);
              }
#endif
            }
          }
        }
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
          const VF scale = L::unit_scale(block[v], u, lane0(v));
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r)
            acc[r][v] = fma_f(mul_f(int_to_f(sum[r][v]), set_f(xs[e / 32 * R + r])), scale, acc[r][v]);
          if constexpr (L::kHasMin) {
            const VF min = L::unit_min(block[v], u, lane0(v));
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) acc[r][v] = fma_f(min, set_f(xm[e / 32 * R + r]), acc[r][v]);
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) block[v] += L::kBlockBytes;
    xq += L::kElems * R;
    xs += L::kElems / 32 * R;
    xm += L::kElems / 32 * R;
    xh += L::kElems / 16 * R;
  }

#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* y = job.y + (r0 + r) * job.y_stride + o0;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      alignas(64) float out[kLanes];
      store_f(out, acc[r][v]);
      for (int l = 0; l < kLanes; ++l) y[v * kLanes + l] = job.bias ? out[l] + job.bias[o0 + v * kLanes + l] : out[l];
    }
  }
}

// fns[kV][R − 1][groups − 1]: a tile of R rows and that many groups (≤ tile_vecs(R)
// vectors); kV: AVX-VNNI's tiles (AVX2 only).
template <class L>
struct InterleavedTiles {
  using Fn = void (*)(const QuantMatmulJob&, const TileRows&, int64_t, int64_t);
  static constexpr int kMaxGroups = 4 / kVecsPerGroup;
  std::array<std::array<std::array<Fn, kMaxGroups>, kMaxRows>, 2> fns{};
  template <bool kV, int R, size_t... Gs>
  void fill(std::index_sequence<Gs...>) {
    ((fns[kV][R - 1][Gs] = &interleaved_tile<L, R, (static_cast<int>(Gs) + 1) * kVecsPerGroup, kV>), ...);
  }
  template <bool kV, size_t... Rs>
  void fill_rows(std::index_sequence<Rs...>) {
    (fill<kV, static_cast<int>(Rs) + 1>(
         std::make_index_sequence<tile_vecs(static_cast<int>(Rs) + 1) / kVecsPerGroup>()),
     ...);
  }
  InterleavedTiles() {
    fill_rows<false>(std::make_index_sequence<kMaxRows>());
    if constexpr (HWY_TARGET == HWY_AVX2) fill_rows<true>(std::make_index_sequence<kMaxRows>());
  }
};

// Outputs [o_begin, o_end) (whole groups) for every row of the job.
template <class L>
void interleaved_matmul(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  static const InterleavedTiles<L> tiles;
  const auto& fns = tiles.fns[HWY_TARGET == HWY_AVX2 && avx_vnni()];
  const auto tile_outs = [](int rows) { return static_cast<int64_t>(tile_vecs(rows) * kLanes); };
  for_each_tile(job.x.n_rows, o_begin, o_end, job.w_row_bytes, kMaxRows, 4 * kGroupRows, tile_outs,
                [&](int64_t r, int rows) {
                  const TileRows packed = tile_rows(job, r, rows);  // once per pass: it may pack the rows
                  return [&, packed, r, rows](int64_t o, int64_t outs) {
                    fns[rows - 1][outs / kGroupRows - 1](job, packed, r, o);
                  };
                });
}

#else  // targets without byte dot products: the same integers and float steps in scalar code

#define NEXTN_INTERLEAVED_SIMD 0
template <class L>
void interleaved_matmul(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  const QuantizedRows& x = job.x;
  const int64_t blocks = job.cols / L::kElems;
  const size_t group_bytes = kGroupRows * job.w_row_bytes;
  for (int64_t r = 0; r < x.n_rows; ++r)
    for (int64_t o0 = o_begin; o0 < o_end; o0 += kGroupRows) {
      const uint8_t* group = job.w + (o0 / kGroupRows) * group_bytes;
      float acc[kGroupRows] = {};
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* block = group + b * L::kBlockBytes;
        for (int u = 0; u < L::kUnits; ++u) {
          const int64_t col = b * L::kElems + u * L::kUnitElems;
          const int8_t* xq = x.q + r * job.cols + col;
          const float xscale = x.scale[r * x.stride + col / 32], xsum = x.sum[r * x.stride + col / 32];
          for (int o = 0; o < kGroupRows; ++o) {
            int32_t sum = 0;
            for (int i = 0; i < L::kUnitElems; ++i) sum += (L::value(block, u, i, o) - L::kOffset) * xq[i];
            acc[o] = std::fma(static_cast<float>(sum) * xscale, L::scale_at(block, u, o), acc[o]);
            if constexpr (L::kHasMin) acc[o] = std::fma(L::min_at(block, u, o), xsum, acc[o]);
          }
        }
      }
      float* y = job.y + r * job.y_stride + o0;
      for (int o = 0; o < kGroupRows; ++o) y[o] = job.bias ? acc[o] + job.bias[o0 + o] : acc[o];
    }
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#endif  // NEXTN_KERNELS_INTERLEAVED_INL_H_
