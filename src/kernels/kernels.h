// kernels/kernels.h — the math of a forward pass on float32 activations.
// Weights stay in their stored format (F32/F16/BF16 or a GGUF block type, [out, in]
// row-major as in Hugging Face); activations are float32 rows. Every kernel is multithreaded over
// the global ThreadPool and dispatched at run time to the best SIMD target
// (AVX-512/BF16, AVX2, NEON) via Highway.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/dtype.h"

namespace nextn {

struct WeightMatrix {
  DType dtype = DType::kF32;   // float, or a GGUF block type (kernels/weight_format.h)
  int64_t rows = 0;            // out_features
  int64_t cols = 0;            // in_features (a multiple of the block for quantized types)
  const void* data = nullptr;  // [rows, dtype_row_bytes(dtype, cols)]
};

// y[r, o] = sum_i x[r, i] * W[o, i] (+ bias[o]) for r < n_rows.
// x: [n_rows, W.cols], y: [n_rows, W.rows]. n_rows == 1 takes the decode path;
// larger batches reuse each weight tile across rows (prefill, verify batches).
void matmul(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, const float* bias = nullptr);

// One matrix of matmul_each: y = x · Wᵀ (+ bias).
struct MatmulOutput {
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
  const float* bias = nullptr;
};
// Several matrices applied to the same rows x (q, k and v; gate and up), each output the
// same bits as matmul() gives it. Quantized matrices of one width (any formats), or float
// matrices of one type and width, share one preparation of x (int8 quantization, bf16
// rounding) and one pass of the pool over all their outputs: a decode step's small
// matmuls each paid both (the pool's hand-off, the preparation on the calling thread).
// Other mixes run one matmul each.
void matmul_each(std::span<const MatmulOutput> outputs, const float* x, int64_t n_rows);

// Whether BF16-weight matmuls on the chosen target round the activations to bf16 (nearest
// even) and multiply with the CPU's bf16 dot product (AVX3_ZEN4), as llama.cpp does for BF16
// weights; otherwise they multiply float32 activations exactly. Either way the products are
// exact and summed in float32.
bool bf16_activations();

// Output rows [o_begin, o_end) of matmul (y[r, o] for o in the range; y keeps its
// [n_rows, W.rows] layout), on the calling thread only: for callers that split their
// own work over the pool (model/routed_mlp.cc: items of (expert, output block)).
void matmul_outputs(const WeightMatrix& w, const float* x, int64_t n_rows, float* y, int64_t o_begin, int64_t o_end);

// out[r] = x[r] / rms(x[r]) * weight, per row of length n. out may alias x.
void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps, float* out);

// Rotary embedding (Hugging Face "rotate_half" convention) in place on
// x: [n_rows, n_heads * head_dim]; row r is at positions[r]. inv_freq has head_dim/2 entries.
void rope(float* x, int64_t n_rows, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* inv_freq);
// The rotation's (cos, sin) for row r and frequency i at [(r · half + i) · 2], computed in
// double and rounded to float; valid until this thread has asked for two other tables.
const float* rope_angles(const int32_t* positions, int64_t n_rows, const float* inv_freq, int64_t half);

// out[i] = silu(gate[i]) * up[i]. out may alias gate.
void swiglu(const float* gate, const float* up, int64_t n, float* out);
// Depthwise causal convolution then SiLU (Gated DeltaNet's short conv), vectorized over
// channels: y[t, c] = silu(Σ_j w[j, c] · x[t + j, c]) for t < n, the taps summed in order
// with fused multiply-adds. x: [n + taps − 1, channels] (the window rows first),
// w: [taps, channels] (tap taps − 1 multiplies the current row), y: [n, channels].
void conv_silu(const float* x, const float* w, int64_t n, int64_t channels, int taps, float* y);
// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU with GELU's tanh form). out may alias gate.
void geglu(const float* gate, const float* up, int64_t n, float* out);
// x[i] = gelu_tanh(x[i]) in place (vision towers' MLPs), the same arithmetic as geglu.
void gelu_tanh(float* x, int64_t n);
// x[i] = cap * tanh(x[i] / cap) (Gemma's logit soft-capping), in place.
void softcap(float* x, int64_t n, float cap);

// In-place softmax of one row; returns nothing. Stable (subtracts the max).
void softmax(float* x, int64_t n);

// Index of the first largest of n values (NaN never chosen; 0 when none is a number
// above −∞, or n ≤ 0; n < 2³¹). Greedy decoding and verification take it over every
// logits row of a step.
int32_t argmax(const float* x, int64_t n);

// Row of n values: dst = src (converting from dtype), for a dtype whose rows are
// contiguous (not an interleaved layout: see matrix_row).
void convert_row(DType dtype, const void* src, int64_t n, float* dst);

// Row `row` of m as float32 (m.cols values), whatever its layout; used for embeddings.
void matrix_row(const WeightMatrix& m, int64_t row, float* out);

// Sum of n floats read sequentially (vectorized, single-threaded). Used by
// `nextn perf` to measure memory read bandwidth; the sum defeats dead-code removal.
float stream_sum(const float* data, int64_t n);

// Streaming read bandwidth in GB/s (1e9 bytes/s) of this machine: best of
// `repeats` passes over a `bytes` buffer (choose it much larger than the caches),
// split over the global ThreadPool.
double measure_read_bandwidth_gbs(size_t bytes, int repeats);

// Name of the SIMD target chosen at run time (e.g. "AVX3_DL", "AVX2"; "AVX2_VNNI" and
// "AVX3_ZEN4": a Highway target plus an instruction some kernels test for at run time,
// kernels/cpu_extras.h).
const char* simd_target_name();

// The SIMD targets this build has code for and this CPU runs, best first.
std::vector<std::string> available_simd_targets();

// Caps run-time dispatch at the named target ("AVX2", "SSE4", "EMU128", ...; any case),
// for every kernel dispatched afterwards: to compare results across targets, or to avoid
// a target that misbehaves on some CPU. The `nextn` binary and the test binaries apply
// the environment variable NEXTN_SIMD this way. kBadInput, naming the targets on offer,
// when `name` is not one of them.
void limit_simd_target(const std::string& name);
// limit_simd_target(NEXTN_SIMD) when that variable is set and not empty.
void limit_simd_target_from_environment();

}  // namespace nextn
