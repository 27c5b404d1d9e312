// kernels/weight_format.h — block-quantized weight formats (GGUF's Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; MLX affine 4/8-bit) behind one interface.
//
// Formats come in families, one file each (format_legacy32.cc, format_k_quants.cc,
// format_mlx.cc, format_interleaved16.cc); a format is a WeightFormat there: a scalar
// dequantizer (embedding rows, tests, tools), a quantizer (`nextn quantize`) and a matmul
// over its blocks (an Unpacker the family's one per-target matmul dispatches to by
// FormatCase), plus one line in the table of weight_formats.cc (and its DType with block
// size and GGUF id in util/dtype.h).
//
// Matmul scheme shared by every format (quant_matmul-inl.h): the activations are
// quantized once per matmul to int8 blocks of 32 (QuantizedRows); each weight group of
// 32 is unpacked once into bytes and multiplied as integers with the matching block of
// every activation row of the batch (1-8 rows per pass), the format's integer
// sub-scales applied in the same integer sums. The integer dot of a group is exact, so
// a row's result depends only on that row, never on the rows batched with it.
//
// Interleaved layouts (an Interleaving: Q8_0 → Q8_0x16) regroup a file format's rows at
// load so that one vector holds the same few columns of many rows: the integer dot then
// fills a lane per output row, with no per-row reduction, and small batches cost little
// more than one row. Their rows are not contiguous: read one with matrix_row (kernels.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "util/dtype.h"

namespace nextn {

constexpr int kQuantGroup = 32;  // elements per activation block and per weight group

// Activation rows quantized to blocks of 32: x[i] ≈ scale[b] * q[i] for i in block b.
struct QuantizedRows {
  int64_t n_rows = 0;
  int64_t blocks = 0;               // 32-element blocks per row (cols / 32)
  int64_t stride = 0;               // per-block arrays' row stride (blocks rounded up to 16)
  const int8_t* q = nullptr;        // [n_rows, blocks * 32] values in -127..127
  const float* scale = nullptr;     // [n_rows, stride] block scales (0 for an all-zero block)
  const float* sum = nullptr;       // [n_rows, stride] scale * Σq per block; 0 past `blocks`
  const int32_t* qsum = nullptr;    // [n_rows, 2 · stride] Σq per 16-element half block; 0 past `blocks`
};

// Quantizes x: [n_rows, cols] (cols a multiple of 32) into the caller's buffers:
// q [n_rows * cols], scale and sum [n_rows * quantized_rows_stride(cols)], qsum twice that.
void quantize_rows(const float* x, int64_t n_rows, int64_t cols, int8_t* q, float* scale, float* sum,
                   int32_t* qsum, QuantizedRows& out);
inline int64_t quantized_rows_stride(int64_t cols) { return (cols / kQuantGroup + 15) / 16 * 16; }

// One matmul's inputs for a quantized weight: y[r, o] = Σ_i x[r, i] · W[o, i] (+ bias[o]).
struct QuantMatmulJob {
  const uint8_t* w = nullptr;  // [rows, row_bytes] blocks in the file's layout
  size_t w_row_bytes = 0;
  int64_t cols = 0;            // in_features, a multiple of the format's block
  QuantizedRows x;
  float* y = nullptr;          // [x.n_rows, y_stride]
  int64_t y_stride = 0;        // out_features
  const float* bias = nullptr; // [out_features] or null
  uint64_t id = 0;             // distinct per matmul call (0: none): a thread's packed rows are reused within it
};

struct WeightFormat {
  DType dtype;
  // Converts n elements (a multiple of the block) of consecutive blocks to float32;
  // null for interleaved layouts (their rows are not consecutive blocks).
  void (*dequantize)(const uint8_t* blocks, int64_t n, float* out);
  // Quantizes n elements (a multiple of the block) into blocks; null for interleaved layouts.
  void (*quantize)(const float* x, int64_t n, uint8_t* blocks);
  // Computes the outputs [o_begin, o_end) of every row of the job (single-threaded);
  // o_begin and o_end are multiples of group_rows, or o_end is the last row.
  void (*matmul)(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end);
  int group_rows = 1;  // rows stored together (interleaved layouts), 1 for file formats
  // Row `row` (cols elements) of the matrix at `data`, for interleaved layouts.
  void (*dequantize_row)(const uint8_t* data, int64_t cols, int64_t row, float* out) = nullptr;
};

// A file format's interleaved in-memory layout: `repack` rewrites rows × cols of
// `file` blocks (rows a multiple of the layout's group_rows) as `layout` (rows ×
// dtype_row_bytes(layout, cols) bytes).
struct Interleaving {
  DType file;
  DType layout;
  void (*repack)(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst);
};
// The interleaving of `file` matrices, or null when it has none.
const Interleaving* interleaving(DType file);

// Helpers for the format files: fp16 fields, and rounding for quantizers.
inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
inline void store_f16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }
// The fp16 nearest to v ≥ 0, moved up one step if it rounded below v (a scale stored
// this way never makes the quantized values overflow their range).
inline uint16_t f16_at_least(float v) {
  uint16_t h = f32_to_f16(v);
  if (f16_to_f32(h) < v && h < 0x7bff) ++h;
  return h;
}
// round(v) clamped to [lo, hi].
inline int round_clamp(float v, int lo, int hi) {
  const float r = __builtin_rintf(v);
  return r < static_cast<float>(lo) ? lo : r > static_cast<float>(hi) ? hi : static_cast<int>(r);
}

// For a format file, whose one per-target matmul serves several types: FormatCase<T, U>
// pairs type T with its implementation U (an Unpacker or a layout), and
// for_format<Cases...>(type, run) calls run.template operator()<U>() for the matching case.
template <DType kType, class U>
struct FormatCase {
  static constexpr DType kKey = kType;
  using Impl = U;
};
template <class... Cases, class Run>
void for_format(DType type, Run run) {
  ((type == Cases::kKey ? (run.template operator()<typename Cases::Impl>(), 0) : 0), ...);
}
// In a format file's HWY_ONCE part: exports the per-target Fn(job, o_begin, o_end, type) and
// defines `template <DType kType> void Name(job, o_begin, o_end)`, the matmul of a WeightFormat.
#define NEXTN_EXPORT_FORMAT_MATMUL(Fn, Name) \
  HWY_EXPORT(Fn);                            \
  template <DType kType>                     \
  static void Name(const QuantMatmulJob& job, int64_t o_begin, int64_t o_end) { HWY_DYNAMIC_DISPATCH(Fn)(job, o_begin, o_end, kType); }

// The format of a quantized dtype; null for float dtypes.
const WeightFormat* weight_format(DType dtype);

// One MLX affine group as a format_mlx block: `packed` holds group·bits/32 uint32 words,
// values least-significant bits first (element 0 in bits 0..bits−1 of word 0); x =
// scale·value + bias. bits 4 or 8, group 32, 64 or 128 (the caller checks).
void repack_mlx_group(int bits, int group, const uint32_t* packed, float scale, float bias, uint8_t* block);

}  // namespace nextn
