// io/checkpoint.h — a Hugging Face checkpoint directory.
// Resolves config.json, generation_config.json, model.safetensors or the sharded
// model-0000k-of-0000n.safetensors + model.safetensors.index.json, memory-maps the
// files and validates every header (dtype, shape, offsets within the file size).
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
  // The tensor, checked for presence and exact shape; error names file and tensor.
  const TensorView& require(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> tensor_names() const;
  // Where tensor names are listed (model.safetensors or model.safetensors.index.json), for messages.
  const std::string& tensor_source() const { return tensor_source_; }

 private:
  Checkpoint() = default;
  std::string dir_;
  nlohmann::json config_;
  nlohmann::json generation_config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<TensorView> tensors_;  // sorted by name
  std::map<std::string, std::pair<std::string, std::string>> other_dtypes_;  // non-float: name -> (file, dtype)
  std::string tensor_source_;
};

}  // namespace nextn
