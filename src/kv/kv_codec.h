// kv/kv_codec.h — the row formats of the compressed KV caches and the kernels
// that run attention directly on them.
//
// A "row" is one token's keys (or values) for one KV head: `dim` values split
// in groups. Every format is byte-aligned and laid out so that SIMD code can
// expand 16 codes with one load + shifts; a group's coordinate i = 16·j + l
// (row j, lane l):
//   F16     dim × f16 (one group = the row).
//   Q8      per group: f16 scale, f16 bias, G bytes (byte i = code i), x ≈ scale·code + bias.
//   Q4      per group: f16 scale, f16 bias, G/2 bytes of nibbles: per 32 coordinates
//           16 bytes, byte l = code(l) | code(l + 16) << 4.
//   Turbo4  per block: f16 scale, then nibbles as Q4. x_rot ≈ scale·c[code].
//   Turbo3  per block: f16 scale, B/4 bytes low plane (per 64 coordinates 16
//           bytes, byte l holds bits 0-1 of codes l, l+16, l+32, l+48 at bit
//           2k), B/8 bytes high plane (B = 128: byte l, bit j = bit 2 of code
//           16j+l; B = 64: u16 word j, bit l = bit 2 of code 16j+l).
// Turbo rows hold values in the rotated domain (see hadamard.h); the caller
// rotates before encoding and rotates queries/outputs.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nextn {

enum class RowCodec : uint8_t { kF16, kQ8, kQ4, kTurbo3, kTurbo4 };

struct RowFormat {
  RowCodec codec = RowCodec::kF16;
  int dim = 0;                    // values per row (multiple of 16)
  int group = 0;                  // Q8/Q4 group, Turbo block; F16: dim
  const float* table = nullptr;   // Turbo: 2^bits centroids (ascending)

  int n_groups() const { return dim / group; }
  int header_bytes() const;       // scale (+ bias) bytes in front of each group's codes
  size_t group_bytes() const;
  size_t row_bytes() const { return group_bytes() * static_cast<size_t>(n_groups()); }
  bool has_bias() const { return codec == RowCodec::kQ8 || codec == RowCodec::kQ4; }
};

constexpr int kMaxRowDim = 512;   // largest (padded) head_dim the kernels accept
constexpr int kKernelTile = 128;  // tokens per score/accumulate call, at most

// Encodes one row of f.dim floats (Turbo: already rotated). Scalar.
void encode_row(const RowFormat& f, const float* x, uint8_t* out);
// Decodes one row to f.dim floats (Turbo: the rotated-domain values). Scalar.
void decode_row(const RowFormat& f, const uint8_t* in, float* x);

// scores[k·ld + t] = ⟨q_k, row_t⟩ for t < n_tok (≤ kKernelTile), k < nq.
// q: nq rows of f.dim floats. qsum (Q8/Q4 only): nq × n_groups sums of q per group.
void score_rows(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* q,
                const float* qsum, int nq, float* scores, int ld);
// acc[k·f.dim + i] += Σ_t p[k·ld + t] · row_t[i] for t < n_tok (≤ kKernelTile), k < nq.
void accumulate_rows(const RowFormat& f, const uint8_t* rows, size_t stride, int n_tok, const float* p,
                     int ld, int nq, float* acc);
// One block of online softmax for one query (kv/online_softmax-inl.h, the routine every
// attention path shares): scores[0..n) become weights, m and l absorb them; returns the
// factor the output accumulated so far must be scaled by (exactly 1: unchanged).
float online_softmax_block(float* scores, int n, float& m, float& l);
// x[i] *= c for i < n.
void scale_floats(float* x, int n, float c);
// codes[i] = index of the nearest of `levels` sorted centroids to y[i]·inv_norm
// (count of boundaries below it); returns Σ centroid². SIMD.
double turbo_quantize(const float* y, int n, float inv_norm, const float* boundaries, const float* centroids,
                      int levels, uint8_t* codes);
// n floats ⇄ n little-endian f16 (round to nearest even), SIMD.
void f32_to_f16_row(const float* x, int n, uint8_t* out);
void f16_to_f32_row(const uint8_t* in, int n, float* x);

}  // namespace nextn
