// io/gguf.h — one memory-mapped GGUF file (versions 2 and 3, little-endian), fully
// validated on open: header counts bounded by the file size, every metadata value and
// tensor info inside the file, at most 4 dimensions, a known ggml type whose block
// divides the innermost dimension, data offsets aligned to general.alignment, inside
// the file and not overlapping, and sizes equal to shape × type.
//
// Tensor shapes are reported in PyTorch order (GGUF lists the innermost dimension
// first), so a Linear weight reads [out_features, in_features] as in safetensors.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "io/tensor.h"

namespace nextn {

class GgufFile {
 public:
  // Throws nextn::Error naming the file and the key or tensor at fault.
  static std::unique_ptr<GgufFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  // Metadata key → value: integers, floats, booleans, strings, arrays as JSON arrays.
  const nlohmann::json& metadata() const { return metadata_; }
  // Tensors in file order; names as stored (blk.0.attn_q.weight, ...).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // Integer tensors (I8..I64: indices such as EAGLE-3's d2t), as stored.
  const std::vector<RawTensor>& raw_tensors() const { return raw_tensors_; }
  uint64_t alignment() const { return alignment_; }

 private:
  explicit GgufFile(const std::string& path) : file_(path) {}
  void parse();

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<TensorView> tensors_;
  std::vector<RawTensor> raw_tensors_;
};

// The GGUF file a --model path names: the path itself if it ends in .gguf, else the
// first .gguf file of a directory without config.json; "" for anything else.
std::string gguf_model_file(const std::string& model_path);

// A ggml integer type's dtype name and element size ({nullptr, 0} for other types).
std::pair<const char*, uint64_t> integer_type(uint32_t type);

// Name of a ggml type id for messages ("Q2_K", "IQ4_XS", "type 99" when unknown).
std::string ggml_type_name(uint32_t type);

}  // namespace nextn
