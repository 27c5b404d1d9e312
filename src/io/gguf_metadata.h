// io/gguf_metadata.h — typed reads of one GGUF architecture's metadata keys
// ("<arch>.<key>", llama.cpp's names), each failure naming the file and the key.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace nextn {

class GgufMetadata {
 public:
  // kv: every key of the file (general.*, tokenizer.*, <arch>.*); it must outlive this.
  GgufMetadata(const nlohmann::json& kv, std::string path, std::string arch)
      : kv_(kv), path_(std::move(path)), arch_(std::move(arch)) {}

  const nlohmann::json& all() const { return kv_; }
  const std::string& path() const { return path_; }
  const std::string& arch() const { return arch_; }

  bool has(const std::string& key) const { return kv_.contains(arch_ + "." + key); }
  int64_t integer(const std::string& key) const;
  int64_t integer(const std::string& key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const std::string& key, double fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  // A per-layer key: one integer for every layer, or an array of exactly `layers` integers.
  std::vector<int64_t> per_layer(const std::string& key, int64_t layers) const;
  // An array of exactly `layers` booleans.
  std::vector<bool> flags(const std::string& key, int64_t layers) const;
  // An array of numbers (any length); kBadInput naming the key otherwise.
  std::vector<double> numbers(const std::string& key) const;
  // The id of the token whose text is `text` in tokenizer.ggml.tokens; -1 when the file
  // has no vocabulary or no such token (the converter drops config.json's special ids, so
  // a reader finds them by their text).
  int64_t token_id(const std::string& text) const;

 private:
  const nlohmann::json& at(const std::string& key) const;

  const nlohmann::json& kv_;
  std::string path_, arch_;
};

}  // namespace nextn
