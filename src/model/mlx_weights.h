// model/mlx_weights.h — MLX affine-quantized matrices as mlx-lm writes them: a module P
// stores `P.weight` as uint32 [out, in·bits/32] (values least-significant bits first),
// `P.scales` and `P.biases` as [out, in/group] in the model's float type; config.json
// says {"quantization": {"group_size", "bits", "mode"}, with per-module overrides keyed
// by module path}. A module is quantized iff `P.scales` exists (mlx-lm's own rule).
// Bits and group are read from the shapes and checked against the config; the matrix is
// repacked into the blocks of kernels/format_mlx.cc.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "util/dtype.h"

namespace nextn {

class Checkpoint;

// config.json's quantization settings. Refuses (kBadInput, naming the key) modes other
// than affine and the Hugging Face quant_method checkpoints nextn cannot run (GPTQ,
// AWQ, FP8, ...), so those fail at load with a reason instead of a missing tensor.
struct MlxQuantization {
  bool present = false;    // config.json has "quantization"
  nlohmann::json settings; // that object: defaults and per-module overrides

  static MlxQuantization from_config(const nlohmann::json& config, const std::string& source);
};

// True when `prefix` (a module path, "model.layers.0.mlp.up_proj") is MLX-quantized.
bool is_mlx_quantized(const Checkpoint& ckpt, const std::string& prefix);

// The in-memory dtype of module `prefix` holding a [rows, cols] matrix; kBadInput naming
// the tensor when the three tensors' shapes disagree with each other, with [rows, cols]
// or with the config, or use bits or groups nextn has no kernels for.
DType mlx_matrix_dtype(const Checkpoint& ckpt, const MlxQuantization& q, const std::string& prefix, int64_t rows,
                       int64_t cols);

// Writes the [rows, cols] matrix of `prefix` as `dtype` blocks (rows · dtype_row_bytes).
void repack_mlx_matrix(const Checkpoint& ckpt, const std::string& prefix, DType dtype, int64_t rows, int64_t cols,
                       void* out);

}  // namespace nextn
