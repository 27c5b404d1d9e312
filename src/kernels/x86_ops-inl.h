// kernels/x86_ops-inl.h — the x86 instructions the kernels use beyond Highway 1.0.3's
// portable ops (byte dot products, VNNI, the bf16 dot product, 512-bit shuffles), under
// names that say what they compute, compiled once per target (include it after
// hwy/highway.h). The matmul files call these and hold no intrinsics of their own, so a
// new instruction or target is a change in this one file, as gemma.cpp keeps its ops/.
//
// What a target offers, by switch (each 0 or 1, redefined per target):
//   NEXTN_X86_MADDUBS    SSSE3 and later: unsigned × signed byte pair products.
//   NEXTN_X86_PAIRS      AVX3, AVX3_DL: 512-bit byte vectors holding two 32-byte groups
//                        (V64 below), for the block-quantized matmul.
//   NEXTN_X86_BYTE_TILES AVX2, AVX3, AVX3_DL: raw vectors of the interleaved tiles (TileI,
//                        TileF: 256-bit on AVX2, 512-bit on AVX-512).
//   NEXTN_X86_VNNI       AVX3_DL: 512-bit vpdpbusd (functions that use it carry
//                        NEXTN_X86_VNNI_ATTR: Highway's AVX3_DL target string, 1.0.3, names
//                        only the VEX form).
//   NEXTN_X86_BF16_DOT   AVX3_DL: vdpbf16ps (NEXTN_X86_BF16_DOT_ATTR; used only where the
//                        CPU has AVX512_BF16, kernels/cpu_extras.h).
// Integer results are exact: the callers bound their sums (kernels/quant_matmul-inl.h,
// kernels/interleaved-inl.h).
#if defined(NEXTN_KERNELS_X86_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NEXTN_KERNELS_X86_OPS_INL_H_
#undef NEXTN_KERNELS_X86_OPS_INL_H_
#else
#define NEXTN_KERNELS_X86_OPS_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#if HWY_ARCH_X86
#include <immintrin.h>
#endif

#undef NEXTN_X86_MADDUBS
#undef NEXTN_X86_PAIRS
#undef NEXTN_X86_BYTE_TILES
#undef NEXTN_X86_VNNI
#undef NEXTN_X86_VNNI_ATTR
#undef NEXTN_X86_BF16_DOT
#undef NEXTN_X86_BF16_DOT_ATTR
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_SSSE3
#define NEXTN_X86_MADDUBS 1
#else
#define NEXTN_X86_MADDUBS 0
#endif
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define NEXTN_X86_PAIRS 1
#else
#define NEXTN_X86_PAIRS 0
#endif
#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2
#define NEXTN_X86_BYTE_TILES 1
#else
#define NEXTN_X86_BYTE_TILES 0
#endif
#if HWY_TARGET == HWY_AVX3_DL
#define NEXTN_X86_VNNI 1
#define NEXTN_X86_VNNI_ATTR __attribute__((target(HWY_TARGET_STR ",avx512vnni")))
#define NEXTN_X86_BF16_DOT 1
#define NEXTN_X86_BF16_DOT_ATTR __attribute__((target(HWY_TARGET_STR ",avx512bf16")))
#else
#define NEXTN_X86_VNNI 0
#define NEXTN_X86_VNNI_ATTR
#define NEXTN_X86_BF16_DOT 0
#endif

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if NEXTN_X86_MADDUBS
// Σ mul·(w·x) over a 32-byte group vector: the pair products of unsigned w and signed x
// as int16 (vpmaddubsw), then pairs of those times the int16 multipliers `mul` summed into
// int32 lanes (vpmaddwd). A 256-bit vector on AVX2 and AVX-512 (the group vectors are
// 256-bit there), 128-bit on SSE4.
template <class V32, class V8, class VI8, class V16>
HWY_INLINE V32 pair_dot(V8 w, VI8 x, V16 mul) {
#if HWY_TARGET <= HWY_AVX2
  return V32{_mm256_madd_epi16(_mm256_maddubs_epi16(w.raw, x.raw), mul.raw)};
#else
  return V32{_mm_madd_epi16(_mm_maddubs_epi16(w.raw, x.raw), mul.raw)};
#endif
}
// x with its sign flipped where w is negative and zeroed where w is 0 (vpsignb): with |w|
// as the unsigned operand, the products of signed weights.
template <class VI8, class V8>
HWY_INLINE VI8 sign_by(VI8 x, V8 w) {
#if HWY_TARGET <= HWY_AVX2
  return VI8{_mm256_sign_epi8(x.raw, w.raw)};
#else
  return VI8{_mm_sign_epi8(x.raw, w.raw)};
#endif
}
#endif  // NEXTN_X86_MADDUBS

#if NEXTN_X86_PAIRS
using D64 = hn::Simd<uint8_t, 64, 0>;  // two 32-byte groups
using V64 = hn::Vec<D64>;
using D16x32 = hn::Repartition<int16_t, D64>;
using V16x32 = hn::Vec<D16x32>;
using D32x16 = hn::Repartition<int32_t, D64>;
using V32x16 = hn::Vec<D32x16>;

// The 64 bytes at p.
HWY_INLINE V64 load64(const int8_t* p) { return V64{_mm512_loadu_si512(p)}; }
// The 32 bytes at p, zeros above.
HWY_INLINE V64 load32_low(const int8_t* p) {
  return V64{_mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
// The 32 bytes at p in both halves of a vector: a load-port broadcast, no shuffle.
HWY_INLINE __m512i both_halves(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// 16-bit shift counts: a for the first group's half of a pair, b for the second's.
HWY_INLINE __m512i half_shifts(int a, int b) {
  const uint64_t qa = 0x0001000100010001ull * static_cast<uint64_t>(a), qb = 0x0001000100010001ull * static_cast<uint64_t>(b);
  return _mm512_set_epi64(qb, qb, qb, qb, qa, qa, qa, qa);
}
// Groups 2c and 2c+1 of a K-quant block: the low, then the high nibbles of 32 bytes
// (one broadcast load, one variable shift, one mask).
HWY_INLINE V64 nibble_pair(const uint8_t* qs32) {
  return V64{_mm512_and_si512(_mm512_srlv_epi16(both_halves(qs32), half_shifts(0, 4)), _mm512_set1_epi8(0xF))};
}
// Bits `shift` (first group) and `shift + step` (second group) of 32 bytes, `width` bits
// wide, moved up by 4: the high bits of Q5_K and Q6_K values. (The 16-bit shift moves
// bits across the byte boundary; the per-byte mask drops them before the move up.)
HWY_INLINE V64 high_bits_pair(const uint8_t* qh32, int shift, int step, int width) {
  const __m512i bits = _mm512_and_si512(_mm512_srlv_epi16(both_halves(qh32), half_shifts(shift, shift + step)),
                                        _mm512_set1_epi8(static_cast<char>((1 << width) - 1)));
  return V64{_mm512_slli_epi16(bits, 4)};
}
// One-group blocks two at a time (Q4_0, Q8_0): the 16 nibble bytes at qs and at next (null:
// zeros) as the low, high nibbles of the first block, then of the second.
HWY_INLINE V64 nibbles_of_block_pair(const uint8_t* qs, const uint8_t* next) {
  const __m256i first = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m512i raw =
      next ? _mm512_inserti64x4(_mm512_castsi256_si512(first),
                                _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(next))), 1)
           : _mm512_zextsi256_si512(first);
  const uint64_t four = 0x0004000400040004ull;
  return V64{_mm512_and_si512(_mm512_srlv_epi16(raw, _mm512_set_epi64(four, four, 0, 0, four, four, 0, 0)),
                              _mm512_set1_epi8(0xF))};
}
// The 32 bytes at qs, then the 32 at next (null: zeros).
HWY_INLINE V64 bytes_of_block_pair(const uint8_t* qs, const uint8_t* next) {
  const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  return V64{next ? _mm512_inserti64x4(_mm512_castsi256_si512(first),
                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(next)), 1)
                  : _mm512_zextsi256_si512(first)};
}
// A block's integer sub-scales as int16 lanes, once per block and output row; the
// pairs' multipliers are then one permute each (pair_multipliers).
HWY_INLINE V16x32 sub_scales_u8(const uint8_t* sc8) {  // 8 unsigned (Q4_K, Q5_K)
  return V16x32{_mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc8))))};
}
HWY_INLINE V16x32 sub_scales_i8(const int8_t* sc16) {  // 16 signed (Q6_K)
  return V16x32{_mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc16))))};
}
// The int16 multipliers of pair c's 32 lanes (lane j covers elements 2j, 2j+1 of the
// pair's 64) when each group has `per_group` sub-scales: lane j takes sub-scale
// 2c·per_group + j / (16 / per_group) of the block.
template <int kPerGroup>
struct PairIndex {
  alignas(64) int16_t lanes[4][32];
  constexpr PairIndex() : lanes{} {
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < 32; ++j) lanes[c][j] = static_cast<int16_t>(2 * c * kPerGroup + j / (16 / kPerGroup));
  }
};
template <int kPerGroup>
inline constexpr PairIndex<kPerGroup> kPairIndex{};
template <int kPerGroup>
HWY_INLINE V16x32 pair_multipliers(V16x32 sub_scales, int c) {
  const __m512i index = _mm512_load_si512(kPairIndex<kPerGroup>.lanes[c]);
  return V16x32{_mm512_permutexvar_epi16(index, sub_scales.raw)};
}
// The int16 pair products of unsigned w and signed x (vpmaddubsw).
HWY_INLINE V16x32 pair_products(V64 w, V64 x) { return V16x32{_mm512_maddubs_epi16(w.raw, x.raw)}; }
// kOffset·(x_2i + x_2i+1) per int16 lane, kOffset a power of two: what the pair products
// of values stored with that offset added hold beyond the values' own.
template <int kOffset>
HWY_INLINE V16x32 pair_offsets(V64 x) {
  return V16x32{_mm512_slli_epi16(_mm512_maddubs_epi16(_mm512_set1_epi8(1), x.raw), __builtin_ctz(kOffset))};
}
// Pairs of int16 lanes times mul, summed into int32 lanes (vpmaddwd).
HWY_INLINE V32x16 pair_sums(V16x32 pairs, V16x32 mul) { return V32x16{_mm512_madd_epi16(pairs.raw, mul.raw)}; }
// |w| per signed byte, as unsigned bytes (−128 → 128).
HWY_INLINE V64 abs_bytes(V64 w) { return V64{_mm512_abs_epi8(w.raw)}; }
// x negated in the bytes where w is negative.
HWY_INLINE V64 negate_where_negative(V64 x, V64 w) {
  return V64{_mm512_mask_sub_epi8(x.raw, _mm512_movepi8_mask(w.raw), _mm512_setzero_si512(), x.raw)};
}
// Σ over each int32 lane's 4 bytes of w·x, w unsigned and x signed (vpdpbusd with VNNI,
// else vpmaddubsw + vpmaddwd: equal, as the pair sums cannot overflow for |w| ≤ 128).
HWY_INLINE NEXTN_X86_VNNI_ATTR V32x16 quad_dot(V64 w, V64 x) {
#if NEXTN_X86_VNNI
  return V32x16{_mm512_dpbusd_epi32(_mm512_setzero_si512(), w.raw, x.raw)};
#else
  return pair_sums(pair_products(w, x), V16x32{_mm512_set1_epi16(1)});
#endif
}
#endif  // NEXTN_X86_PAIRS

#if NEXTN_X86_BYTE_TILES
#if HWY_TARGET == HWY_AVX2
using TileI = __m256i;
using TileF = __m256;
constexpr int kTileLanes = 8;
HWY_INLINE TileI load_i(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
HWY_INLINE TileI set_i(int32_t v) { return _mm256_set1_epi32(v); }
HWY_INLINE TileI bytes_i(uint8_t v) { return _mm256_set1_epi8(static_cast<char>(v)); }
HWY_INLINE TileI and_i(TileI a, TileI b) { return _mm256_and_si256(a, b); }
HWY_INLINE TileI or_i(TileI a, TileI b) { return _mm256_or_si256(a, b); }
HWY_INLINE TileI xor_i(TileI a, TileI b) { return _mm256_xor_si256(a, b); }
HWY_INLINE TileI shift_right16(TileI a, int n) { return _mm256_srli_epi16(a, n); }
HWY_INLINE TileI shift_left16(TileI a, int n) { return _mm256_slli_epi16(a, n); }
HWY_INLINE TileI abs_i8(TileI a) { return _mm256_abs_epi8(a); }
HWY_INLINE TileI add_i16(TileI a, TileI b) { return _mm256_add_epi16(a, b); }
HWY_INLINE TileI maddubs_i(TileI w, TileI x) { return _mm256_maddubs_epi16(w, x); }
// sum + the int16 pair sums of `pairs` summed in pairs into int32 lanes.
HWY_INLINE TileI widen_add(TileI sum, TileI pairs) { return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))); }
HWY_INLINE TileF zero_f() { return _mm256_setzero_ps(); }
HWY_INLINE TileF mul_f(TileF a, TileF b) { return _mm256_mul_ps(a, b); }
HWY_INLINE TileF neg_f(TileF a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
HWY_INLINE TileF fma_f(TileF a, TileF b, TileF c) { return _mm256_fmadd_ps(a, b, c); }
HWY_INLINE TileF set_f(float v) { return _mm256_set1_ps(v); }
HWY_INLINE TileF int_to_f(TileI a) { return _mm256_cvtepi32_ps(a); }
HWY_INLINE TileF f16s(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
HWY_INLINE TileF u8s(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
HWY_INLINE TileF i8s(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
HWY_INLINE void store_f(float* p, TileF v) { _mm256_storeu_ps(p, v); }
// x with its sign flipped where w is negative and zeroed where w is 0 (vpsignb).
struct SignOf {
  TileI w;
};
HWY_INLINE SignOf sign_of(TileI w) { return {w}; }
HWY_INLINE TileI apply_sign(TileI x, SignOf s) { return _mm256_sign_epi8(x, s.w); }
#else
using TileI = __m512i;
using TileF = __m512;
constexpr int kTileLanes = 16;
HWY_INLINE TileI load_i(const uint8_t* p) { return _mm512_loadu_si512(p); }
HWY_INLINE TileI set_i(int32_t v) { return _mm512_set1_epi32(v); }
HWY_INLINE TileI bytes_i(uint8_t v) { return _mm512_set1_epi8(static_cast<char>(v)); }
HWY_INLINE TileI and_i(TileI a, TileI b) { return _mm512_and_si512(a, b); }
HWY_INLINE TileI or_i(TileI a, TileI b) { return _mm512_or_si512(a, b); }
HWY_INLINE TileI xor_i(TileI a, TileI b) { return _mm512_xor_si512(a, b); }
HWY_INLINE TileI shift_right16(TileI a, int n) { return _mm512_srli_epi16(a, static_cast<unsigned>(n)); }
HWY_INLINE TileI shift_left16(TileI a, int n) { return _mm512_slli_epi16(a, static_cast<unsigned>(n)); }
HWY_INLINE TileI abs_i8(TileI a) { return _mm512_abs_epi8(a); }
HWY_INLINE TileI add_i16(TileI a, TileI b) { return _mm512_add_epi16(a, b); }
HWY_INLINE TileI maddubs_i(TileI w, TileI x) { return _mm512_maddubs_epi16(w, x); }
HWY_INLINE TileI widen_add(TileI sum, TileI pairs) { return _mm512_add_epi32(sum, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1))); }
HWY_INLINE TileF zero_f() { return _mm512_setzero_ps(); }
HWY_INLINE TileF mul_f(TileF a, TileF b) { return _mm512_mul_ps(a, b); }
HWY_INLINE TileF neg_f(TileF a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN))); }
HWY_INLINE TileF fma_f(TileF a, TileF b, TileF c) { return _mm512_fmadd_ps(a, b, c); }
HWY_INLINE TileF set_f(float v) { return _mm512_set1_ps(v); }
HWY_INLINE TileF int_to_f(TileI a) { return _mm512_cvtepi32_ps(a); }
HWY_INLINE TileF f16s(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
HWY_INLINE TileF u8s(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
HWY_INLINE TileF i8s(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
HWY_INLINE void store_f(float* p, TileF v) { _mm512_storeu_ps(p, v); }
// x negated in the bytes where w is negative (AVX-512 has no vpsignb: a masked subtract,
// the mask taken once per weight vector).
struct SignOf {
  __mmask64 negative;
};
HWY_INLINE SignOf sign_of(TileI w) { return {_mm512_movepi8_mask(w)}; }
HWY_INLINE TileI apply_sign(TileI x, SignOf s) { return _mm512_mask_sub_epi8(x, s.negative, _mm512_setzero_si512(), x); }
#if NEXTN_X86_VNNI
// sum + Σ over each lane's 4 columns of w·x, w unsigned and x signed (vpdpbusd).
HWY_INLINE NEXTN_X86_VNNI_ATTR TileI quad_dot_add(TileI sum, TileI w, TileI x) { return _mm512_dpbusd_epi32(sum, w, x); }
#endif
#endif
// AVX-VNNI's vpdpbusd (VEX, 256-bit): sum + Σ over each lane's 4 columns of w·x. Inline
// assembly, so the caller needs no target attribute beyond Highway's AVX2 (callers run it
// only where avx_vnni() said the CPU has it). A template: only the AVX2 tiles instantiate it.
template <class V>
HWY_INLINE V quad_dot_add_avx_vnni(V sum, V w, V x) {
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(sum) : "x"(w), "x"(x));
  return sum;
}
// The 4 bytes at p in every 32-bit lane.
HWY_INLINE TileI broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return set_i(v);
}
#endif  // NEXTN_X86_BYTE_TILES

#if NEXTN_X86_BF16_DOT
// 16 float lanes and 32 bf16 pairs (vdpbf16ps adds to each float lane the two products of
// the bf16 pair it holds).
using Bf16Acc = __m512;
using Bf16Pairs = __m512bh;
HWY_INLINE NEXTN_X86_BF16_DOT_ATTR Bf16Acc bf16_zero() { return _mm512_setzero_ps(); }
HWY_INLINE NEXTN_X86_BF16_DOT_ATTR Bf16Pairs load_bf16x32(const void* p) { return (__m512bh)_mm512_loadu_si512(p); }
HWY_INLINE NEXTN_X86_BF16_DOT_ATTR Bf16Acc bf16_dot_add(Bf16Acc acc, Bf16Pairs w, Bf16Pairs x) {
  return _mm512_dpbf16_ps(acc, w, x);
}
HWY_INLINE NEXTN_X86_BF16_DOT_ATTR float bf16_sum(Bf16Acc acc) { return _mm512_reduce_add_ps(acc); }
// The 32 floats at src rounded to bf16 (nearest even; subnormals flush to zero) at dst.
HWY_INLINE NEXTN_X86_BF16_DOT_ATTR void round32_to_bf16(const float* src, uint16_t* dst) {
  const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
  _mm512_storeu_si512(dst, (__m512i)v);
}
#endif  // NEXTN_X86_BF16_DOT

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#endif  // NEXTN_KERNELS_X86_OPS_INL_H_
