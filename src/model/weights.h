// model/weights.h — binding checkpoint tensors to the forward pass.
// Matrices stay in their stored dtype: either copied into 64-byte aligned memory
// (LoadOptions.copy_weights, the default) or served from the mmap. MLX-quantized
// modules are repacked into memory (model/mlx_weights.h). Norm weights and biases are
// small and always converted to float32.
#pragma once
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/mlx_weights.h"

namespace nextn {

class Checkpoint;
struct TensorView;

// A projection: y = x W^T (+ bias).
struct Linear {
  WeightMatrix w;
  const float* bias = nullptr;  // [w.rows] or null
};

class WeightStore {
 public:
  WeightStore(const Checkpoint& ckpt, bool copy);

  // How a matrix is read: only by matmul, so that a copied one may be regrouped into an
  // interleaved layout the kernels multiply faster (kernels/weight_format.h), or also a
  // row at a time through its data pointer (kept in the file's row layout).
  enum class Access { kMatmul, kRows };

  // Requires `name` with shape [rows, cols].
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, Access access = Access::kMatmul);
  // Requires `name` with shape [n, rows, cols] (experts stacked in one tensor); returns
  // it as one [n * rows, cols] matrix whose block i is matrix i (slice_rows).
  WeightMatrix stacked(const std::string& name, int64_t n, int64_t rows, int64_t cols);
  Linear linear(const std::string& prefix, int64_t rows, int64_t cols, bool bias);  // prefix.weight (+ prefix.bias)
  // A table read one row per token (Gemma 4's per-layer embeddings, 2.35 B values at
  // E2B): served from the checkpoint's mapping even when copying, so only the rows in
  // use are paged in. The checkpoint must then stay open (uses_mapping()).
  WeightMatrix row_table(const std::string& name, int64_t rows, int64_t cols);
  bool uses_mapping() const { return uses_mapping_; }
  // Requires `name` with shape [n]; returns float32 values.
  const float* vector(const std::string& name, int64_t n);
  // Requires `name` with exactly `shape`; returns its values as float32 plus `offset`
  // (1 for the (1+w) RMSNorm scales of Qwen3.5, added once here at load).
  const float* floats(const std::string& name, std::vector<int64_t> shape, float offset = 0.0f);
  // Requires `name` with shape [rows, cols]; returns it converted to an F32 matrix (for
  // the few small matrices whose products must not round their activations: routers).
  WeightMatrix float_matrix(const std::string& name, int64_t rows, int64_t cols);
  bool has(const std::string& name) const;

  // Bytes of all matrices bound so far (what a decode step streams).
  size_t matrix_bytes() const { return matrix_bytes_; }
  // Bytes of bound matrices a decode row does not read (the experts a router did not
  // choose: model/routed_mlp.cc counts all but top_k per layer).
  void count_unread(size_t bytes) { unread_bytes_ += bytes; }
  size_t unread_bytes() const { return unread_bytes_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  void* allocate(size_t bytes);
  // The module of `name` ("P" of "P.weight") when it is MLX-quantized, else "".
  std::string mlx_module(const std::string& name) const;
  // t as a [rows, cols] matrix: copied (and interleaved, for kMatmul when its format has a
  // layout whose row groups divide `group`) or served from the mapping.
  WeightMatrix bind(const TensorView& t, int64_t rows, int64_t cols, int64_t group, Access access);

  const Checkpoint& ckpt_;
  bool copy_;
  MlxQuantization mlx_;
  size_t matrix_bytes_ = 0;
  size_t unread_bytes_ = 0;
  bool uses_mapping_ = false;
  std::vector<std::unique_ptr<void, FreeDeleter>> buffers_;
};

// Rows [row0, row0 + n) of `m` as a matrix of its own (no copy; whole row groups of an
// interleaved layout).
WeightMatrix slice_rows(const WeightMatrix& m, int64_t row0, int64_t n);

// Embedding row lookup into float32 (checks the token id against the vocabulary).
void embed_rows(const WeightMatrix& embedding, const int32_t* tokens, int64_t n, float* out);

}  // namespace nextn
