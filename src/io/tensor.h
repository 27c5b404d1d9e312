// io/tensor.h — dtypes and non-owning views of tensors stored in checkpoint files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/dtype.h"

namespace nextn {

// A tensor inside a memory-mapped file (or an owned buffer). Row-major, shape as stored
// (Hugging Face Linear weights are [out_features, in_features]).
struct TensorView {
  std::string name;
  std::string file;  // which file it came from, for error messages
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const;
  std::string shape_string() const;  // "[1024, 896]"
  // Element i of an F32/F16/BF16 tensor as float32 (any alignment of the data).
  float float_at(int64_t i) const;
  // Every element as float32 (small tensors: norms, biases, position tables).
  std::vector<float> floats() const;
};

// A stored tensor of a dtype nextn does not compute with (I64, U32, F8_E4M3, ...): its
// bytes as they are, for formats that pack values into integer tensors (MLX's uint32
// weights) and for error messages naming the dtype.
struct RawTensor {
  std::string name;
  std::string file;
  std::string dtype;  // the safetensors dtype name, "U32"
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

}  // namespace nextn
