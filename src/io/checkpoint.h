// io/checkpoint.h — a model's tensors and config, from a Hugging Face checkpoint
// directory or a GGUF file.
// Directory: resolves config.json, generation_config.json, model.safetensors or the
// sharded model-0000k-of-0000n.safetensors + model.safetensors.index.json,
// memory-maps the files and validates every header (dtype, shape, offsets within the
// file size).
// Official FP8 checkpoints (F8_E4M3 weights with block scales) are converted to BF16
// at load (fp8_weights.cc).
// GGUF (a FILE.gguf, a directory holding one, or split FILE-00001-of-0000N.gguf):
// every file validated (io/gguf.h); config.json is derived from the metadata and the
// tensors are renamed to Hugging Face names (gguf_checkpoint.cc), so the model code
// sees one kind of checkpoint.
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/tensor.h"

namespace nextn {

class SafetensorsFile;
class GgufFile;

class Checkpoint {
 public:
  // Throws nextn::Error naming the file and the problem.
  static std::unique_ptr<Checkpoint> open(const std::string& dir);
  ~Checkpoint();

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  // generation_config.json, or an empty object when absent.
  const nlohmann::json& generation_config() const { return generation_config_; }

  bool has(const std::string& name) const;
  const TensorView* find(const std::string& name) const;
  // A tensor of a non-float dtype (MLX's packed uint32 weights), or null.
  const RawTensor* find_raw(const std::string& name) const;
  // The tensor, checked for presence and exact shape; error names file and tensor.
  const TensorView& require(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> tensor_names() const;
  // Where tensor names are listed (model.safetensors or model.safetensors.index.json), for messages.
  const std::string& tensor_source() const { return tensor_source_; }
  // GGUF checkpoints: the first file's metadata (tokenizer.ggml.*, chat template); else null.
  const nlohmann::json* gguf_metadata() const;

 private:
  Checkpoint() = default;
  static std::unique_ptr<Checkpoint> open_gguf(const std::string& path);
  // Block-scaled FP8 weights (F8_E4M3 + <name>_scale_inv) → BF16 tensors (fp8_weights.cc).
  void convert_fp8_weights();
  std::string dir_;
  nlohmann::json config_;
  nlohmann::json generation_config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::unique_ptr<GgufFile>> gguf_files_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;  // tensors rearranged at load (llama Q/K rows, FP8 → BF16)
  std::vector<TensorView> tensors_;  // sorted by name
  std::map<std::string, RawTensor> other_tensors_;  // non-float dtypes, by name
  std::string tensor_source_;
};

}  // namespace nextn
