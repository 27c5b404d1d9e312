// kernels/quant_matmul-inl.h — the matmul shared by every quantized weight format,
// compiled once per SIMD target (include it after hwy/highway.h from a format file).
//
// A format supplies an Unpacker:
//   kBlockBytes, kGroups (32-element groups per block),
//   kSigned: its group bytes are int8 (Q8_0, Q6_K, MLX 8-bit) rather than unsigned
//     values of at most 63 (4- and 5-bit formats),
//   kSubScales: its groups carry integer sub-scales (K-quants), given per 16-element
//     half by sub_scales(h, g, lo, hi), |sub-scale| ≤ 128,
//   kHasMin: the group has an offset (x = scale·(sub-scale·value) + min),
//   Header + header(block, h): what is decoded once per block (scales, mins),
//   group(d8, block, h, g, out[kVecs]): the 32 bytes of group g in element order,
//   scale(h, g): the float factor of group g; mins(h, out[kGroups]): the offsets of the
//     block's groups (kHasMin).
// Then Σ_i w_i x_i over group g = scale·xscale·Σ(sub-scale·value·q) + min·xsum.
//
// The integer dot of a group multiplies the weight bytes with the int8 activations
// pairwise into int16 (x86: vpmaddubsw, unsigned × signed; a signed weight goes in as
// |w| with its sign moved onto the activation) and sums pairs into int32 with the
// sub-scales as the multipliers (vpmaddwd). Every partial sum is exact: a pair is at most
// 2·128·127 = 32512 < 2^15 (|w| ≤ 128), and a whole group at most 32·4096·127 < 2^24
// (|sub-scale·w| ≤ 4096: Q6_K's 128·32), so the conversion to float is exact too.
// Other targets compute the same integers with widened multiplies.
//
// On AVX-512, formats whose blocks hold an even number of groups under one float scale
// (the K-quants) also supply pair(block, h, c) / kPairOffset: groups 2c and 2c+1 as one
// 512-bit vector of unsigned bytes (the value is byte − kPairOffset), which halves the
// instructions per weight; and pair_sub_scales(h) / kPairSubScales: the block's integer
// sub-scales as int16 lanes, kPairSubScales per group. Formats of one group per block
// (Q4_0, Q8_0) supply block_pair(block, both) instead: two consecutive blocks in one
// vector (with VNNI, AVX3_DL, their integer dot is one vpdpbusd).
//
// A tile is R activation rows × O weight rows: each weight group is unpacked once into
// registers and used for all R rows. Every (row, output) pair runs the same instruction
// sequence whatever R, O or the thread split, which is what makes a row's result
// independent of its batch.
#if defined(NEXTN_KERNELS_QUANT_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NEXTN_KERNELS_QUANT_MATMUL_INL_H_
#undef NEXTN_KERNELS_QUANT_MATMUL_INL_H_
#else
#define NEXTN_KERNELS_QUANT_MATMUL_INL_H_
#endif

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "hwy/cache_control.h"
#include "kernels/tiling.h"
#include "kernels/weight_format.h"
#include "kernels/x86_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One 32-element group is kVecs byte vectors: 1 on AVX2 and AVX-512 (256-bit vectors,
// which leave AVX-512's 32 registers for more tiles), 2 on 128-bit targets.
using D8 = hn::CappedTag<uint8_t, kQuantGroup>;
using V8 = hn::Vec<D8>;
using D16 = hn::Repartition<int16_t, D8>;
using V16 = hn::Vec<D16>;
using D32 = hn::Repartition<int32_t, D8>;
using V32 = hn::Vec<D32>;
using DQF = hn::Repartition<float, D8>;
using VQF = hn::Vec<DQF>;
constexpr size_t kVecs = kQuantGroup / hn::MaxLanes(D8());

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM_A64
constexpr int kAccRegs = 16;  // 32 vector registers: half of them accumulate
#else
constexpr int kAccRegs = 8;  // 16 vector registers
#endif
// Decode (one row) tiles: 4 weight rows in flight (8 measured 10-20 % slower on AVX-512).
constexpr int kQuantDecodeOuts = 4;
constexpr int kQuantRows = 8;  // activation rows per pass over the weights

// The AVX-512 pair paths (see the top of the file), this file's switch: the format
// files' pair functions are compiled under it.
#undef NEXTN_QUANT_PAIRS
#if NEXTN_X86_PAIRS
#define NEXTN_QUANT_PAIRS 1
using DPF = hn::Repartition<float, D64>;  // 16 lanes: 8 per group
template <class U>
constexpr bool kPaired = requires { U::kPairOffset; };
// Formats of one group per block (Q4_0, Q8_0) pair two blocks instead: block_pair(p,
// both) is the group of the block at p and, when `both`, of the next block, as one vector
// of bytes (unsigned values, or int8 when kSigned); the upper half is zero otherwise.
template <class U>
constexpr bool kBlockPaired = requires { U::block_pair(nullptr, true); };
// One float per group of a pair: `first` in the lanes of group 2c, `second` in 2c+1's.
HWY_INLINE hn::Vec<DPF> pair_floats(float first, float second) {
  const hn::Half<DPF> dh;
  return hn::Combine(DPF(), hn::Set(dh, second), hn::Set(dh, first));
}
#else
#define NEXTN_QUANT_PAIRS 0
using DPF = hn::Repartition<float, D8>;
template <class U>
constexpr bool kPaired = false;
template <class U>
constexpr bool kBlockPaired = false;
#endif
// Outputs per tile for R rows: as many as the accumulators allow, at least one.
constexpr int tile_outs(int rows) { return rows == 1 ? kQuantDecodeOuts : std::max(1, kAccRegs / rows); }
constexpr int kQuantMaxOuts = kQuantDecodeOuts > kAccRegs / 2 ? kQuantDecodeOuts : kAccRegs / 2;

// The 4-bit values of a 32-element group stored as 16 bytes in ggml's order (byte j
// holds element j in its low and element j+16 in its high nibble): vector k of the group.
template <class D>  // a template so that the branches for other vector widths are not compiled
HWY_INLINE hn::Vec<D> split_nibbles(D d, const uint8_t* qs16, size_t k) {
  if constexpr (hn::MaxLanes(D()) >= 32) {
    const hn::Half<D> dh;
    const auto raw = hn::LoadU(dh, qs16);
    return Combine(d, hn::ShiftRight<4>(raw), hn::And(raw, hn::Set(dh, 0xF)));  // found by ADL
  } else {
    const size_t first = k * hn::Lanes(d);
    const auto raw = hn::LoadU(d, qs16 + first % 16);
    return first < 16 ? hn::And(raw, hn::Set(d, 0xF)) : hn::ShiftRight<4>(raw);
  }
}

// Vector k of a group whose element l is byte l of 32 consecutive bytes (K-quants):
// low nibbles, or high nibbles when `high`.
HWY_INLINE V8 nibbles_of_32(D8 d, const uint8_t* qs32, size_t k, bool high) {
  const V8 raw = hn::LoadU(d, qs32 + k * hn::Lanes(d));
  return high ? hn::ShiftRight<4>(raw) : hn::And(raw, hn::Set(d, 0xF));
}

// 16 where bit e of the little-endian 32 bits at `bits` is set, for the elements of vector k.
HWY_INLINE V8 fifth_bits(D8 d, const uint8_t* bits, size_t k) {
  const size_t first = k * hn::Lanes(d);
  uint8_t shifted[8] = {};  // LoadMaskBits reads whole bytes: start at bit `first`
  if (first % 8 == 0) {
    std::memcpy(shifted, bits + first / 8, std::min<size_t>(8, 4 - first / 8));
  } else {
    shifted[0] = static_cast<uint8_t>(bits[first / 8] >> (first % 8));
  }
  return hn::IfThenElseZero(hn::LoadMaskBits(d, shifted), hn::Set(d, 16));
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

// A group's weight bytes as the integer dot wants them, prepared once per output and
// used for every row: for signed weights, |w| (as unsigned bytes) beside w.
template <bool kSigned>
struct GroupWeights {
  V8 w[kVecs];
  V8 mag[kSigned ? kVecs : 1];
  V16 sub[kVecs];  // int16 multipliers of the pairs (the sub-scales, or 1)
};

template <bool kSigned>
HWY_INLINE void prepare(GroupWeights<kSigned>& gw, int lo, int hi) {
  const D16 d16;
  const size_t n16 = hn::Lanes(d16);
  for (size_t k = 0; k < kVecs; ++k) {
#if NEXTN_X86_MADDUBS
    if constexpr (kSigned) gw.mag[k] = hn::BitCast(D8(), hn::Abs(hn::BitCast(hn::RebindToSigned<D8>(), gw.w[k])));
    // Pair lane j of vector k covers elements 2j, 2j+1 of its 2·n16 elements.
    if (n16 >= 16) {
      gw.sub[k] = lo == hi ? hn::Set(d16, static_cast<int16_t>(lo))
                           : hn::IfThenElse(hn::FirstN(d16, 8), hn::Set(d16, static_cast<int16_t>(lo)),
                                            hn::Set(d16, static_cast<int16_t>(hi)));
    } else {
      gw.sub[k] = hn::Set(d16, static_cast<int16_t>(k * 2 * n16 < 16 ? lo : hi));
    }
#else
    (void)n16;
    gw.sub[k] = hn::Zero(d16);  // unused: the portable dot reads lo/hi itself
#endif
  }
}

#if NEXTN_X86_MADDUBS
// Σ sub·w·x over one group as int32 partial sums (x86: pmaddubsw, pmaddwd).
template <bool kSigned>
HWY_INLINE V32 group_dot(const GroupWeights<kSigned>& gw, const int8_t* xq, int, int) {
  const D32 d32;
  V32 sum = hn::Zero(d32);
  for (size_t k = 0; k < kVecs; ++k) {
    const auto x = hn::LoadU(hn::RebindToSigned<D8>(), xq + k * hn::Lanes(D8()));
    if constexpr (kSigned) sum = hn::Add(sum, pair_dot<V32>(gw.mag[k], sign_by(x, gw.w[k]), gw.sub[k]));
    else sum = hn::Add(sum, pair_dot<V32>(gw.w[k], x, gw.sub[k]));
  }
  return sum;
}
#else
// The same integers with widened multiplies, 32-bit lanes (targets without pmaddubsw).
template <bool kSigned>
HWY_INLINE V32 group_dot(const GroupWeights<kSigned>& gw, const int8_t* xq, int lo, int hi) {
  const D32 d32;
  const hn::Rebind<int8_t, D32> di8;
  const hn::Rebind<uint8_t, D32> du8;
  alignas(64) uint8_t bytes[kQuantGroup];
  for (size_t k = 0; k < kVecs; ++k) hn::StoreU(gw.w[k], D8(), bytes + k * hn::Lanes(D8()));
  const size_t n = hn::Lanes(d32);
  V32 sum = hn::Zero(d32);
  for (size_t i = 0; i < kQuantGroup; i += n) {
    const V32 w = kSigned ? hn::PromoteTo(d32, hn::LoadU(di8, reinterpret_cast<const int8_t*>(bytes) + i))
                          : hn::BitCast(d32, hn::PromoteTo(hn::RebindToUnsigned<D32>(), hn::LoadU(du8, bytes + i)));
    const V32 x = hn::PromoteTo(d32, hn::LoadU(di8, xq + i));
    // Elements 0..15 take the low half's sub-scale, 16..31 the high half's.
    sum = hn::Add(sum, hn::Mul(hn::Mul(w, x), hn::Set(d32, i < 16 ? lo : hi)));
  }
  return sum;
}
#endif

// Σ_b a[b]·c[b] over n floats (n a multiple of 16), in a fixed order.
HWY_INLINE float dot_padded(const float* a, const float* c, int64_t n) {
  const DQF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  VQF acc = hn::Zero(df);
  for (int64_t i = 0; i < n; i += lanes) acc = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, c + i), acc);
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// −dmin·m[j] for the 8 sub-blocks of a K-quant block (Q4_K, Q5_K).
HWY_INLINE void kquant_mins(const uint8_t* m, float dmin, float* out) {
  const hn::CappedTag<int32_t, 8> di;
  const hn::Rebind<uint8_t, decltype(di)> du8;
  const hn::Rebind<float, decltype(di)> df;
  const auto neg = hn::Set(df, -dmin);
  for (size_t j = 0; j < 8; j += hn::Lanes(di))
    hn::StoreU(hn::Mul(neg, hn::ConvertTo(df, hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<decltype(di)>(), hn::LoadU(du8, m + j))))), df, out + j);
}

template <class U>
HWY_INLINE void sub_scales_of(const typename U::Header& h, int g, int& lo, int& hi) {
  if constexpr (U::kSubScales) {
    U::sub_scales(h, g, lo, hi);
  } else {
    lo = hi = 1;
  }
}

#if NEXTN_QUANT_PAIRS
// The groups of block b for a tile, two at a time (AVX-512; see the top of the file):
// acc[r][o] += (Σ sub·value·q as float) · (the two groups' activation scales) · scale.
template <class U, int R, int O>
HWY_INLINE void pairs(const QuantMatmulJob& job, int64_t r0, int64_t b, const uint8_t* const* wrow,
                      const typename U::Header* h, hn::Vec<DPF> (&acc)[R][O]) {
  static_assert(U::kGroups % 2 == 0 && (U::kPairOffset & (U::kPairOffset - 1)) == 0);
  const DPF df;
  const QuantizedRows& x = job.x;
  hn::Vec<DPF> scale[O];
  V16x32 sub_scales[O];
#pragma GCC unroll 16
  for (int o = 0; o < O; ++o) {
    scale[o] = hn::Set(df, U::scale(h[o], 0));
    sub_scales[o] = U::pair_sub_scales(h[o]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < U::kGroups / 2; ++c) {
    const int64_t xb = b * U::kGroups + 2 * c;
    V64 w[O];
    V16x32 mul[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      w[o] = U::pair(wrow[o] + b * U::kBlockBytes, h[o], c);
      mul[o] = pair_multipliers<U::kPairSubScales>(sub_scales[o], c);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V64 xq = load64(x.q + (r0 + r) * job.cols + xb * kQuantGroup);
      const float* xs = x.scale + (r0 + r) * x.stride + xb;
      const auto xscale = pair_floats(xs[0], xs[1]);
      V16x32 offset = hn::Zero(D16x32());  // kPairOffset·(x_2i + x_2i+1)
      if constexpr (U::kPairOffset != 0) offset = pair_offsets<U::kPairOffset>(xq);
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) {
        V16x32 products = pair_products(w[o], xq);
        if constexpr (U::kPairOffset != 0) products = hn::Sub(products, offset);
        const V32x16 dot = pair_sums(products, mul[o]);
        acc[r][o] = hn::MulAdd(hn::Mul(hn::ConvertTo(df, dot), xscale), scale[o], acc[r][o]);
      }
    }
  }
}

// Blocks b and b+1 (or b alone when !kBoth: the upper half of every vector is zero, so
// it adds exact zeros) of a one-group-per-block format, for a tile (AVX-512):
// acc[r][o] += (Σ w·q as float) · (the blocks' activation scales) · (the blocks' scales).
template <class U, int R, int O, bool kBoth>
HWY_INLINE NEXTN_X86_VNNI_ATTR void block_pairs(const QuantMatmulJob& job, int64_t r0, int64_t b,
                                                  const uint8_t* const* wrow, const typename U::Header* h0,
                                                  const typename U::Header* h1, hn::Vec<DPF> (&acc)[R][O]) {
  const DPF df;
  const QuantizedRows& x = job.x;
  V64 w[O], mag[O];  // signed weights (Q8_0) go in as |w|, negating the activation where w < 0
  hn::Vec<DPF> scale[O];
#pragma GCC unroll 16
  for (int o = 0; o < O; ++o) {
    w[o] = U::block_pair(wrow[o] + b * U::kBlockBytes, kBoth);
    mag[o] = U::kSigned ? abs_bytes(w[o]) : w[o];
    scale[o] = pair_floats(U::scale(h0[o], 0), kBoth ? U::scale(h1[o], 0) : 0.0f);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const int8_t* xq = x.q + (r0 + r) * job.cols + b * kQuantGroup;
    const V64 xv = kBoth ? load64(xq) : load32_low(xq);
    const float* xs = x.scale + (r0 + r) * x.stride + b;
    const auto xscale = pair_floats(xs[0], kBoth ? xs[1] : 0.0f);
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      const V64 xo = U::kSigned ? negate_where_negative(xv, w[o]) : xv;
      const V32x16 dot = quad_dot(mag[o], xo);
      acc[r][o] = hn::MulAdd(hn::Mul(hn::ConvertTo(df, dot), xscale), scale[o], acc[r][o]);
    }
  }
}
#endif

// Block b's headers (and mins into `mins`), prefetching the same block of the next
// tile's rows (rows are contiguous, and a row of a 1024-column matrix is only 576 bytes
// at Q4_0: one tile of lead time).
template <class U, int O>
HWY_INLINE void block_headers(const QuantMatmulJob& job, int64_t b, const uint8_t* const* wrow,
                              size_t prefetch_step, typename U::Header* h, float* mins) {
#pragma GCC unroll 16
  for (int o = 0; o < O; ++o) {
    const uint8_t* ahead = wrow[o] + prefetch_step + b * U::kBlockBytes;
#pragma GCC unroll 4
    for (int p = 0; p < U::kBlockBytes; p += 64) hwy::Prefetch(ahead + p);
    U::header(wrow[o] + b * U::kBlockBytes, h[o]);
    if constexpr (U::kHasMin) U::mins(h[o], mins + o * job.x.stride + b * U::kGroups);
  }
}

// R rows × O outputs starting at (r0, o0). `mins` is scratch of O × x.stride floats.
template <class U, int R, int O>
HWY_NOINLINE NEXTN_X86_VNNI_ATTR void quant_tile(const QuantMatmulJob& job, int64_t r0, int64_t o0, float* mins) {
  const D8 d8;
  using DAcc = std::conditional_t<kPaired<U> || kBlockPaired<U>, DPF, DQF>;
  const DAcc df;
  constexpr int kBytes = U::kBlockBytes;
  const int64_t n_blocks = job.cols / (U::kGroups * kQuantGroup);
  const QuantizedRows& x = job.x;
  const uint8_t* wrow[O];
  const size_t prefetch_step = O * job.w_row_bytes;
  hn::Vec<DAcc> acc[R][O];
#pragma GCC unroll 16
  for (int o = 0; o < O; ++o) wrow[o] = job.w + (o0 + o) * job.w_row_bytes;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = hn::Zero(df);

#if NEXTN_QUANT_PAIRS
  if constexpr (kBlockPaired<U>) {
    for (int64_t b = 0; b < n_blocks; b += 2) {
      typename U::Header h0[O], h1[O];
      block_headers<U, O>(job, b, wrow, prefetch_step, h0, mins);
      if (b + 1 < n_blocks) {
        block_headers<U, O>(job, b + 1, wrow, prefetch_step, h1, mins);
        block_pairs<U, R, O, true>(job, r0, b, wrow, h0, h1, acc);
      } else {
        block_pairs<U, R, O, false>(job, r0, b, wrow, h0, h0, acc);
      }
    }
  } else
#endif
  for (int64_t b = 0; b < n_blocks; ++b) {
    typename U::Header h[O];
    block_headers<U, O>(job, b, wrow, prefetch_step, h, mins);
#if NEXTN_QUANT_PAIRS
    if constexpr (kPaired<U>) pairs<U, R, O>(job, r0, b, wrow, h, acc);
    else
#endif
#pragma GCC unroll 8
    for (int g = 0; g < U::kGroups; ++g) {
      const int64_t xb = b * U::kGroups + g;
      GroupWeights<U::kSigned> gw[O];
      int lo[O], hi[O];
      VQF scale[O];
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) {
        U::group(d8, wrow[o] + b * kBytes, h[o], g, gw[o].w);
        sub_scales_of<U>(h[o], g, lo[o], hi[o]);
        prepare(gw[o], lo[o], hi[o]);
        scale[o] = hn::Set(df, U::scale(h[o], g));
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const int8_t* xq = x.q + (r0 + r) * job.cols + xb * kQuantGroup;
        const VQF xscale = hn::Set(df, x.scale[(r0 + r) * x.stride + xb]);  // a broadcast load
#pragma GCC unroll 16
        for (int o = 0; o < O; ++o) {
          const V32 dot = group_dot(gw[o], xq, lo[o], hi[o]);
          acc[r][o] = hn::MulAdd(hn::Mul(hn::ConvertTo(df, dot), xscale), scale[o], acc[r][o]);
        }
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

// fns[R−1][O−1] for O ≤ tile_outs(R).
template <class U>
struct QuantTileTable {
  using Fn = void (*)(const QuantMatmulJob&, int64_t, int64_t, float*);
  std::array<std::array<Fn, kQuantMaxOuts>, kQuantRows> fns{};
  template <int R, size_t... Os>
  void fill(std::index_sequence<Os...>) {
    ((fns[R - 1][Os] = &quant_tile<U, R, static_cast<int>(Os) + 1>), ...);
  }
  template <size_t... Rs>
  void fill_rows(std::index_sequence<Rs...>) {
    (fill<static_cast<int>(Rs) + 1>(std::make_index_sequence<tile_outs(static_cast<int>(Rs) + 1)>()), ...);
  }
  QuantTileTable() { fill_rows(std::make_index_sequence<kQuantRows>()); }
};

// The matmul of a format file that serves several types (FormatCase<type, Unpacker>...).
template <class U>
void quant_matmul_outputs(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end);
template <class... Cases>
void quant_matmul_of(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end, DType type) {
  for_format<Cases...>(type, [&]<class U>() { quant_matmul_outputs<U>(job, o_begin, o_end); });
}

// Outputs [o_begin, o_end) for every row of the job.
template <class U>
void quant_matmul_outputs(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) {
  static const QuantTileTable<U> table;
  thread_local std::vector<float> mins;
  if (U::kHasMin) mins.assign(static_cast<size_t>(kQuantMaxOuts * job.x.stride), 0.0f);
  for_each_tile(job.x.n_rows, o_begin, o_end, job.w_row_bytes, kQuantRows, kQuantMaxOuts, tile_outs,
                [&](int64_t r, int rows) {
                  return [&, r, rows](int64_t o, int64_t outs) { table.fns[rows - 1][outs - 1](job, r, o, mins.data()); };
                });
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#endif  // NEXTN_KERNELS_QUANT_MATMUL_INL_H_
