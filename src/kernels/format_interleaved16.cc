// kernels/format_interleaved16.cc — file formats regrouped 16 rows at a time
// (kernels/interleaved-inl.h): in-memory layouts the weight store repacks copied Q8_0, Q4_0,
// Q4_K and Q6_K matrices into (Interleaving in kernels/weight_format.h).
//
// Q8_0x16:
//   A block of a group is 32 columns of 16 rows in 544 bytes (16 × 34, as in the file): the
//   16 rows' fp16 scales d, then 8 chunks of 64 bytes, chunk c holding columns 4c..4c+3 of
//   row 0, of row 1, ..., each as q + 128 (an unsigned byte). One unit per block.
// Q4_0x16:
//   A block of a group is 32 columns of 16 rows in 288 bytes (16 × 18, as in the file): the
//   rows' fp16 d, then 4 vectors of 64 bytes, vector p holding in byte 4o + k column 4p + k of
//   row o (low nibble) and column 4(p + 4) + k (high nibble). x = d·(q − 8); one unit per block.
// Q4_Kx16:
//   A block of a group is 256 columns of 16 rows in 2368 bytes (148 per row; the file's 144
//   plus its 6-bit sub-block scales and minimums unpacked to bytes): the rows' fp16 d, their
//   fp16 dmin, sc[8 sub-blocks][16 rows], m[8][16], then per sub-block (a unit of 32 columns)
//   4 vectors of 64 bytes, vector p holding in byte 4o + k column 4p + k of row o (low nibble)
//   and column 4(p + 4) + k (high nibble): chunks p and p + 4. x = d·sc·q − dmin·m.
// Q6_Kx16:
//   A block of a group is 256 columns of 16 rows in 3360 bytes (16 × 210, as in the file):
//   the rows' fp16 d, their int8 sub-block scales sc[16 sub-blocks][16 rows], then per 32
//   columns (two units of 16) 384 bytes: 4 vectors of 64 bytes whose byte 4o + k holds the
//   low 4 bits of column 4p + k of row o (low nibble) and of column 4(p + 4) + k (high
//   nibble), then 2 vectors whose byte 4o + k holds in bits 2s, 2s + 1 the top 2 bits of
//   column 4(4h + s) + k. Values q are 0..63; x = d·sc·(q − 32).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/format_interleaved16.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/interleaved-inl.h"

#ifndef NEXTN_KERNELS_FORMAT_INTERLEAVED16_LAYOUTS  // this file is compiled once per target
#define NEXTN_KERNELS_FORMAT_INTERLEAVED16_LAYOUTS
#include "kernels/kquant_scales.h"

namespace nextn {
// Each layout's bytes, read one value at a time (the scalar code, rows, repacking).
struct Q8_0x16Bytes {
  static constexpr int kElems = 32, kBlockBytes = 544, kUnits = 1, kUnitElems = 32, kOffset = 128, kMaxValue = 255, kStep = 1;
  static constexpr bool kHasMin = false;
  static constexpr int kChunks = 32;  // bytes before the first chunk: the scales
  static int at(int i, int o) { return kChunks + 64 * (i / 4) + 4 * o + i % 4; }
  static int value(const uint8_t* block, int, int i, int o) { return block[at(i, o)]; }
  static float scale_at(const uint8_t* block, int, int o) { return load_f16(block + 2 * o); }
  static float min_at(const uint8_t*, int, int) { return 0.0f; }
  // Row o from the file's block {fp16 d; int8 qs[32]}: chunk p is its bytes 4p.. + 128.
  static void put(uint8_t* block, int o, const uint8_t* in) {
    std::memcpy(block + 2 * o, in, 2);
    for (int p = 0; p < kElems / 4; ++p) {
      uint32_t word;
      std::memcpy(&word, in + 2 + 4 * p, 4);
      word ^= 0x80808080u;
      std::memcpy(block + at(4 * p, o), &word, 4);
    }
  }
};

struct Q4_0x16Bytes {
  static constexpr int kElems = 32, kBlockBytes = 288, kUnits = 1, kUnitElems = 32, kOffset = 8, kMaxValue = 15, kStep = 1;
  static constexpr bool kHasMin = false;
  static constexpr int kQs = 32;  // bytes before the first vector: the scales
  static int at(int i, int o) { return kQs + 64 * (i / 4 % 4) + 4 * o + i % 4; }
  static bool high(int i) { return i >= 16; }  // chunks 4..7
  static int value(const uint8_t* block, int, int i, int o) {
    const int byte = block[at(i, o)];
    return high(i) ? byte >> 4 : byte & 0xF;
  }
  static float scale_at(const uint8_t* block, int, int o) { return load_f16(block + 2 * o); }
  static float min_at(const uint8_t*, int, int) { return 0.0f; }
  // Row o from the file's block {fp16 d; qs[16]}: element j in the low nibble of byte j,
  // element j + 16 in its high nibble, which is the layout's pairing of chunks p and p + 4:
  // chunk p's bytes are the file's bytes 4p...
  static void put(uint8_t* block, int o, const uint8_t* in) {
    std::memcpy(block + 2 * o, in, 2);
    for (int p = 0; p < 4; ++p) std::memcpy(block + at(4 * p, o), in + 2 + 4 * p, 4);
  }
};

struct Q4_Kx16Bytes {
  static constexpr int kElems = 256, kBlockBytes = 2368, kUnits = 8, kUnitElems = 32, kOffset = 0, kMaxValue = 15, kStep = 1;
  static constexpr bool kHasMin = true;
  static constexpr int kMin = 32, kSc = 64, kM = 192, kQs = 320;  // byte offsets in a block
  static int at(int u, int i, int o) { return kQs + 256 * u + 64 * (i / 4 % 4) + 4 * o + i % 4; }
  static bool high(int i) { return i >= 16; }  // chunks 4..7
  static int value(const uint8_t* block, int u, int i, int o) {
    const int byte = block[at(u, i, o)];
    return high(i) ? byte >> 4 : byte & 0xF;
  }
  static float scale_at(const uint8_t* block, int u, int o) {
    return static_cast<float>(block[kSc + 16 * u + o]) * load_f16(block + 2 * o);
  }
  static float min_at(const uint8_t* block, int u, int o) {
    return static_cast<float>(block[kM + 16 * u + o]) * -load_f16(block + kMin + 2 * o);
  }
  // Row o from the file's block {fp16 d, dmin; scales[12]; qs[128]}: sub-block u in the
  // low (even u) or high nibbles of qs[32(u/2) ..]. Writes every byte of row o's share.
  static void put(uint8_t* block, int o, const uint8_t* in) {
    std::memcpy(block + 2 * o, in, 2);
    std::memcpy(block + kMin + 2 * o, in + 2, 2);
    int sc[8], m[8];
    unpack_scale_min_k4(in + 4, sc, m);
    uint8_t q[256];  // element 32u + i
    for (int pair = 0; pair < 4; ++pair)
      for (int i = 0; i < 32; ++i) {
        q[64 * pair + i] = in[16 + 32 * pair + i] & 0xF;
        q[64 * pair + 32 + i] = in[16 + 32 * pair + i] >> 4;
      }
    for (int u = 0; u < kUnits; ++u) {
      block[kSc + 16 * u + o] = static_cast<uint8_t>(sc[u]);
      block[kM + 16 * u + o] = static_cast<uint8_t>(m[u]);
      const uint8_t* v = q + 32 * u;
      uint8_t* out = block + at(u, 0, o);
      for (int p = 0; p < 4; ++p)  // chunk p: columns 4p.. (low nibbles) and 16 + 4p.. (high)
        for (int k = 0; k < 4; ++k) out[64 * p + k] = static_cast<uint8_t>(v[4 * p + k] | v[16 + 4 * p + k] << 4);
    }
  }
};

struct Q6_Kx16Bytes {
  static constexpr int kElems = 256, kBlockBytes = 3360, kUnits = 16, kUnitElems = 16, kOffset = 32, kMaxValue = 63, kStep = 2;
  static constexpr bool kHasMin = false;
  static constexpr int kSc = 32, kQ = 288, kPairBytes = 384;  // byte offsets / sizes in a block
  // Chunk cc (0..7) of the 32 columns of units 2P, 2P+1: its nibble byte and its top-bits byte.
  static int low_at(int u, int cc, int o, int k) { return kQ + kPairBytes * (u / 2) + 64 * (cc % 4) + 4 * o + k; }
  static int top_at(int u, int cc, int o, int k) { return kQ + kPairBytes * (u / 2) + 256 + 64 * (cc / 4) + 4 * o + k; }
  static int value(const uint8_t* block, int u, int i, int o) {
    const int cc = 4 * (u % 2) + i / 4, k = i % 4;
    const int low = cc < 4 ? block[low_at(u, cc, o, k)] & 0xF : block[low_at(u, cc, o, k)] >> 4;
    return low | ((block[top_at(u, cc, o, k)] >> (2 * (cc % 4))) & 3) << 4;
  }
  static float scale_at(const uint8_t* block, int u, int o) {
    return static_cast<float>(static_cast<int8_t>(block[kSc + 16 * u + o])) * load_f16(block + 2 * o);
  }
  static float min_at(const uint8_t*, int, int) { return 0.0f; }
  // Row o from the file's block {ql[128]; qh[64]; int8 sc[16]; fp16 d}: the values of
  // elements e = 128·half + 32·j + l read as the file's dequantizer reads them (low 4 bits
  // in ql[64·half + 32(j % 2) + l], high nibble for j ≥ 2; top 2 in qh[32·half + l] >> 2j),
  // then written into row o's bytes, every one of them.
  static void put(uint8_t* block, int o, const uint8_t* in) {
    std::memcpy(block + 2 * o, in + 208, 2);
    for (int u = 0; u < kUnits; ++u) block[kSc + 16 * u + o] = in[192 + u];
    uint8_t low[256], top[256];
    for (int half = 0; half < 2; ++half)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
          const int e = 128 * half + 32 * j + l;
          low[e] = static_cast<uint8_t>((in[64 * half + 32 * (j % 2) + l] >> (4 * (j / 2))) & 0xF);
          top[e] = static_cast<uint8_t>((in[128 + 32 * half + l] >> (2 * j)) & 3);
        }
    for (int pair = 0; pair < kUnits / 2; ++pair) {  // units 2·pair, 2·pair + 1: columns e0 ..
      const uint8_t* lo = low + 32 * pair;
      const uint8_t* hi = top + 32 * pair;
      uint8_t* nibbles = block + low_at(2 * pair, 0, o, 0);
      uint8_t* tops = block + top_at(2 * pair, 0, o, 0);
      for (int p = 0; p < 4; ++p)
        for (int k = 0; k < 4; ++k) nibbles[64 * p + k] = static_cast<uint8_t>(lo[4 * p + k] | lo[16 + 4 * p + k] << 4);
      for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 4; ++k)
          tops[64 * h + k] = static_cast<uint8_t>(hi[16 * h + k] | hi[16 * h + 4 + k] << 2 | hi[16 * h + 8 + k] << 4 |
                                                  hi[16 * h + 12 + k] << 6);
    }
  }
};
}  // namespace nextn
#endif

HWY_BEFORE_NAMESPACE();
namespace nextn {
namespace HWY_NAMESPACE {

struct Q8_0x16Layout : Q8_0x16Bytes {
#if NEXTN_INTERLEAVED_SIMD
  static VI chunk(const uint8_t* block, int, int c, int lane0) { return load_i(block + kChunks + 64 * c + 4 * lane0); }
  static VF unit_scale(const uint8_t* block, int, int lane0) { return f16s(block + 2 * lane0); }
  static VF unit_min(const uint8_t*, int, int) { return zero_f(); }
#endif
};

struct Q4_0x16Layout : Q4_0x16Bytes {
#if NEXTN_INTERLEAVED_SIMD
  static VI chunk(const uint8_t* block, int, int c, int lane0) {
    const VI packed = load_i(block + kQs + 64 * (c % 4) + 4 * lane0);
    return and_i(c < 4 ? packed : shift_right16(packed, 4), bytes_i(0xF));
  }
  static VF unit_scale(const uint8_t* block, int, int lane0) { return f16s(block + 2 * lane0); }
  static VF unit_min(const uint8_t*, int, int) { return zero_f(); }
#endif
};

struct Q4_Kx16Layout : Q4_Kx16Bytes {
#if NEXTN_INTERLEAVED_SIMD
  static VI chunk(const uint8_t* block, int u, int c, int lane0) {
    const VI packed = load_i(block + kQs + 256 * u + 64 * (c % 4) + 4 * lane0);
    return and_i(c < 4 ? packed : shift_right16(packed, 4), bytes_i(0xF));
  }
  static VF unit_scale(const uint8_t* block, int u, int lane0) {
    return mul_f(u8s(block + kSc + 16 * u + lane0), f16s(block + 2 * lane0));
  }
  static VF unit_min(const uint8_t* block, int u, int lane0) {
    return mul_f(u8s(block + kM + 16 * u + lane0), neg_f(f16s(block + kMin + 2 * lane0)));
  }
#endif
};

struct Q6_Kx16Layout : Q6_Kx16Bytes {
#if NEXTN_INTERLEAVED_SIMD
  static VI chunk(const uint8_t* block, int u, int c, int lane0) {
    const int cc = 4 * (u % 2) + c;
    const VI packed = load_i(block + low_at(u, cc, lane0, 0));
    const VI low = and_i(cc < 4 ? packed : shift_right16(packed, 4), bytes_i(0xF));
    const VI top = and_i(shift_right16(load_i(block + top_at(u, cc, lane0, 0)), 2 * (cc % 4)), bytes_i(3));
    return or_i(low, shift_left16(top, 4));
  }
  static VF unit_scale(const uint8_t* block, int u, int lane0) {
    return mul_f(i8s(block + kSc + 16 * u + lane0), f16s(block + 2 * lane0));
  }
  static VF unit_min(const uint8_t*, int, int) { return zero_f(); }
#endif
};

void MatmulInterleaved16(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end, DType type) {
  for_format<FormatCase<DType::kQ8_0x16, Q8_0x16Layout>, FormatCase<DType::kQ4_0x16, Q4_0x16Layout>,
             FormatCase<DType::kQ4_Kx16, Q4_Kx16Layout>, FormatCase<DType::kQ6_Kx16, Q6_Kx16Layout>>(
      type, [&]<class L>() { interleaved_matmul<L>(job, o_begin, o_end); });
}

}  // namespace HWY_NAMESPACE
}  // namespace nextn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nextn {
// The table entries: each layout's matmul and row reader, and its repacking from the file format.

NEXTN_EXPORT_FORMAT_MATMUL(MatmulInterleaved16, matmul_interleaved16)

// The format of layout kLayout (bytes B) and how file format kFile is repacked into it.
template <class B, DType kLayout>
static constexpr WeightFormat layout_format() {
  return {kLayout, nullptr, nullptr, matmul_interleaved16<kLayout>, 16, dequantize_interleaved_row<B, kLayout>};
}
template <class B, DType kFile, DType kLayout>
static constexpr Interleaving interleaving_of() {
  return {kFile, kLayout, repack_interleaved<B, kFile, kLayout>};
}

extern const WeightFormat kQ8_0x16Format = layout_format<Q8_0x16Bytes, DType::kQ8_0x16>();
extern const WeightFormat kQ4_0x16Format = layout_format<Q4_0x16Bytes, DType::kQ4_0x16>();
extern const WeightFormat kQ4_Kx16Format = layout_format<Q4_Kx16Bytes, DType::kQ4_Kx16>();
extern const WeightFormat kQ6_Kx16Format = layout_format<Q6_Kx16Bytes, DType::kQ6_Kx16>();
extern const Interleaving kQ8_0x16Interleaving = interleaving_of<Q8_0x16Bytes, DType::kQ8_0, DType::kQ8_0x16>();
extern const Interleaving kQ4_0x16Interleaving = interleaving_of<Q4_0x16Bytes, DType::kQ4_0, DType::kQ4_0x16>();
extern const Interleaving kQ4_Kx16Interleaving = interleaving_of<Q4_Kx16Bytes, DType::kQ4_K, DType::kQ4_Kx16>();
extern const Interleaving kQ6_Kx16Interleaving = interleaving_of<Q6_Kx16Bytes, DType::kQ6_K, DType::kQ6_Kx16>();

}  // namespace nextn
#endif  // HWY_ONCE
