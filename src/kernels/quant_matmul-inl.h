// kernels/quant_matmul-inl.h — the matmul shared by every quantized weight format,
// compiled once per SIMD target (include it after hwy/highway.h from a format file).
//
// A format supplies an Unpacker:
//   kType, kGroups (32-element groups per block), kHasMin (x = scale·q + min form),
//   Header + header(block, h): what is decoded once per block (scales, mins),
//   group(d16, block, h, g, out[kVecs]): the int16 values of group g with the
//     format's integer sub-scales folded in (|value| ≤ 4096, so the int32 dot of a
//     group with int8 activations is exact),
//   scale(h, g) / min(h, g): the float factors of group g.
// Then Σ_i w_i x_i over group g = scale·xscale·Σ(value·q) + min·xsum.
//
// A tile is R activation rows × O weight rows: each weight group is unpacked once
// into registers and used for all R rows. Every (row, output) pair runs the same
// instruction sequence whatever R, O or the thread split, which is what makes a
// row's result independent of its batch.
#if defined(NEXTN_KERNELS_QUANT_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NEXTN_KERNELS_QUANT_MATMUL_INL_H_
#undef NEXTN_KERNELS_QUANT_MATMUL_INL_H_
#else
#define NEXTN_KERNELS_QUANT_MATMUL_INL_H_
#endif

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "hwy/cache_control.h"
#include "kernels/weight_format.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D16 = hn::CappedTag<int16_t, kQuantGroup>;
using V16 = hn::Vec<D16>;
using D32 = hn::Repartition<int32_t, D16>;
using DQF = hn::Repartition<float, D16>;
using VQF = hn::Vec<DQF>;
// int16 vectors per 32-element group (fixed-width targets: 1 on AVX-512, 2 on AVX2, 4 on 128-bit).
constexpr size_t kVecs = kQuantGroup / hn::MaxLanes(D16());

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM_A64
constexpr int kQuantOuts = 4, kQuantDecodeOuts = 8;  // 32 vector registers
#else
constexpr int kQuantOuts = 2, kQuantDecodeOuts = 4;  // 16 vector registers
#endif
// Decode (one row) keeps more weight rows in flight: it waits on memory, not on math.
constexpr int kQuantTableOuts = kQuantDecodeOuts > kQuantOuts ? kQuantDecodeOuts : kQuantOuts;
constexpr size_t kPrefetchBytes = 1024;  // how far ahead in each weight row to prefetch
constexpr int kQuantRows = 8;  // activation rows per pass over the weights

// The 4-bit values of elements [k·N, k·N+N) of a 32-element group stored as 16 bytes
// in ggml's order: byte j holds element j (low nibble) and element j+16 (high nibble).
template <class D>  // a template so that the branch for other vector widths is not compiled
HWY_INLINE hn::Vec<D> split_nibbles(D d, const uint8_t* qs16, size_t k) {
  const hn::Rebind<uint8_t, D> du8;
  if constexpr (hn::MaxLanes(D()) <= 16) {
    const size_t first = k * hn::Lanes(d);
    const auto raw = hn::PromoteTo(d, hn::LoadU(du8, qs16 + first % 16));
    return first < 16 ? hn::And(raw, hn::Set(d, 0xF)) : hn::ShiftRight<4>(raw);
  } else {
    // One vector spans the whole group: low nibbles in the lower half, high in the upper.
    const hn::Half<D> dh;
    const hn::Rebind<uint8_t, decltype(dh)> du8h;
    const auto raw = hn::PromoteTo(dh, hn::LoadU(du8h, qs16));
    return Combine(d, hn::ShiftRight<4>(raw), hn::And(raw, hn::Set(dh, 0xF)));  // found by ADL (absent on 1-lane targets)
  }
}

// An fp16 field as float32 with the target's conversion instruction (F16C on x86, fcvt
// on Arm): the formats' block headers call this once per block and output row, where
// the portable integer conversion of util/dtype.h cost a dozen scalar instructions and
// branches. Exact either way, so every target computes the same scales.
HWY_INLINE float load_f16(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh1;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh1, reinterpret_cast<const hwy::float16_t*>(p))));
}

// The 4-bit values of elements [k·N, k·N+N) of a group whose element l is byte l of
// 32 consecutive bytes (K-quants): low nibbles, or high nibbles when `high`.
HWY_INLINE V16 nibbles_of_32(D16 d, const uint8_t* qs32, size_t k, bool high) {
  const hn::Rebind<uint8_t, D16> du8;
  const V16 raw = hn::PromoteTo(d, hn::LoadU(du8, qs32 + k * hn::Lanes(d)));
  return high ? hn::ShiftRight<4>(raw) : hn::And(raw, hn::Set(d, 0xF));
}

// 16 where bit e of the little-endian uint32 `bits` is set, for elements e of [k·N, k·N+N).
HWY_INLINE V16 fifth_bits(D16 d, uint32_t bits, size_t k) {
  alignas(64) static constexpr int16_t kBit[32] = {
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768,
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768};
  const size_t n = hn::Lanes(d);
  const size_t first = k * n;
  V16 word;
  if (n <= 16) {
    const uint32_t half = (bits >> (first / 16 * 16)) & 0xFFFF;
    word = hn::Set(d, static_cast<int16_t>(static_cast<uint16_t>(half >> (first % 16))));
  } else {
    word = hn::IfThenElse(hn::FirstN(d, 16), hn::Set(d, static_cast<int16_t>(static_cast<uint16_t>(bits & 0xFFFF))),
                          hn::Set(d, static_cast<int16_t>(static_cast<uint16_t>(bits >> 16))));
  }
  const V16 tested = hn::And(word, hn::LoadU(d, kBit));
  return hn::IfThenElseZero(hn::Ne(tested, hn::Zero(d)), hn::Set(d, 16));
}

// Σ_b a[b]·c[b] over n floats (n a multiple of 16), in a fixed order.
HWY_INLINE float dot_padded(const float* a, const float* c, int64_t n) {
  const DQF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  VQF acc = hn::Zero(df);
  for (int64_t i = 0; i < n; i += lanes) acc = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, c + i), acc);
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// R rows × O outputs starting at (r0, o0). `mins` is scratch of O × x.stride floats.
template <class U, int R, int O>
HWY_NOINLINE void quant_tile(const QuantMatmulJob& job, int64_t r0, int64_t o0, float* mins) {
  const D16 d16;
  const D32 d32;
  const DQF df;
  constexpr int kBytes = U::kBlockBytes;
  const int64_t n_blocks = job.cols / (U::kGroups * kQuantGroup);
  const QuantizedRows& x = job.x;
  const uint8_t* wrow[O];
  VQF acc[R][O];
#pragma GCC unroll 16
  for (int o = 0; o < O; ++o) wrow[o] = job.w + (o0 + o) * job.w_row_bytes;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = hn::Zero(df);

  for (int64_t b = 0; b < n_blocks; ++b) {
    typename U::Header h[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      hwy::Prefetch(wrow[o] + b * kBytes + kPrefetchBytes);
      U::header(wrow[o] + b * kBytes, h[o]);
    }
    for (int g = 0; g < U::kGroups; ++g) {
      const int64_t xb = b * U::kGroups + g;
      V16 w[O][kVecs];
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) U::group(d16, wrow[o] + b * kBytes, h[o], g, w[o]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const int16_t* xq = x.q + (r0 + r) * job.cols + xb * kQuantGroup;
        const float xs = x.scale[(r0 + r) * x.stride + xb];
        V16 xv[kVecs];
#pragma GCC unroll 16
        for (size_t k = 0; k < kVecs; ++k) xv[k] = hn::LoadU(d16, xq + k * hn::Lanes(d16));
#pragma GCC unroll 16
        for (int o = 0; o < O; ++o) {
          auto s0 = hn::Zero(d32), s1 = hn::Zero(d32);
#pragma GCC unroll 16
          for (size_t k = 0; k < kVecs; ++k) s0 = hn::ReorderWidenMulAccumulate(d32, w[o][k], xv[k], s0, s1);
          const auto dot = hn::RearrangeToOddPlusEven(s0, s1);
          acc[r][o] = hn::MulAdd(hn::Set(df, U::scale(h[o], g) * xs), hn::ConvertTo(df, dot), acc[r][o]);
        }
      }
      if constexpr (U::kHasMin) {
#pragma GCC unroll 16
        for (int o = 0; o < O; ++o) mins[o * x.stride + xb] = U::min(h[o], g);
      }
    }
  }

#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* yr = job.y + (r0 + r) * job.y_stride;
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[r][o]));
      if constexpr (U::kHasMin) sum += dot_padded(mins + o * x.stride, x.sum + (r0 + r) * x.stride, x.stride);
      if (job.bias) sum += job.bias[o0 + o];
      yr[o0 + o] = sum;
    }
  }
}

template <class U>
struct QuantTileTable {
  using Fn = void (*)(const QuantMatmulJob&, int64_t, int64_t, float*);
  std::array<std::array<Fn, kQuantOuts>, kQuantRows> fns;  // fns[R-1][O-1]
  std::array<Fn, kQuantDecodeOuts> decode;                 // R = 1: decode[O-1]
  template <int R, size_t... Os>
  static constexpr std::array<Fn, sizeof...(Os)> row(std::index_sequence<Os...>) {
    return {&quant_tile<U, R, static_cast<int>(Os) + 1>...};
  }
  template <size_t... Rs>
  static constexpr std::array<std::array<Fn, kQuantOuts>, kQuantRows> make(std::index_sequence<Rs...>) {
    return {row<static_cast<int>(Rs) + 1>(std::make_index_sequence<kQuantOuts>())...};
  }
  QuantTileTable()
      : fns(make(std::make_index_sequence<kQuantRows>())),
        decode(row<1>(std::make_index_sequence<kQuantDecodeOuts>())) {}
};

// Outputs [o_begin, o_end) for every row of the job.
template <class U>
void quant_matmul_outputs(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  static const QuantTileTable<U> table;
  thread_local std::vector<float> mins;
  if (U::kHasMin) mins.assign(static_cast<size_t>(kQuantTableOuts * job.x.stride), 0.0f);
  const int64_t n_rows = job.x.n_rows;
  if (n_rows == 1) {
    for (int64_t o = o_begin; o < o_end; o += kQuantDecodeOuts) {
      const int64_t oo = std::min<int64_t>(kQuantDecodeOuts, o_end - o);
      table.decode[oo - 1](job, 0, o, mins.data());
    }
    return;
  }
  // Output blocks whose weights stay in L2 while every group of 8 rows passes over them.
  int64_t block = n_rows <= kQuantRows ? o_end - o_begin
                                       : static_cast<int64_t>((256 * 1024) / std::max<size_t>(1, job.w_row_bytes));
  block = std::max<int64_t>(kQuantOuts, block / kQuantOuts * kQuantOuts);
  for (int64_t ob = o_begin; ob < o_end; ob += block) {
    const int64_t ob_end = std::min(o_end, ob + block);
    for (int64_t r = 0; r < n_rows; r += kQuantRows) {
      const int64_t rr = std::min<int64_t>(kQuantRows, n_rows - r);
      for (int64_t o = ob; o < ob_end; o += kQuantOuts) {
        const int64_t oo = std::min<int64_t>(kQuantOuts, ob_end - o);
        table.fns[rr - 1][oo - 1](job, r, o, mins.data());
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#endif  // NEXTN_KERNELS_QUANT_MATMUL_INL_H_
