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

  // Requires `name` with shape [rows, cols].
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols);
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
  bool has(const std::string& name) const;

  // Bytes of all matrices bound so far (what a decode step streams).
  size_t matrix_bytes() const { return matrix_bytes_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  void* allocate(size_t bytes);
  // The module of `name` ("P" of "P.weight") when it is MLX-quantized, else "".
  std::string mlx_module(const std::string& name) const;

  const Checkpoint& ckpt_;
  bool copy_;
  MlxQuantization mlx_;
  size_t matrix_bytes_ = 0;
  bool uses_mapping_ = false;
  std::vector<std::unique_ptr<void, FreeDeleter>> buffers_;
};

// Embedding row lookup into float32 (checks the token id against the vocabulary).
void embed_rows(const WeightMatrix& embedding, const int32_t* tokens, int64_t n, float* out);

}  // namespace nextn
