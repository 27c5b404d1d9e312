// io/gguf_metadata.cc — see gguf_metadata.h.
#include "io/gguf_metadata.h"

#include "io/json_file.h"
#include "util/error.h"

namespace nextn {

const nlohmann::json& GgufMetadata::at(const std::string& key) const {
  const std::string full = arch_ + "." + key;
  if (!kv_.contains(full)) fail(ErrorKind::kBadInput, "{}: missing metadata key '{}'", path_, full);
  return kv_.at(full);
}

int64_t GgufMetadata::integer(const std::string& key) const {
  const nlohmann::json& v = at(key);
  if (!v.is_number_integer())
    fail(ErrorKind::kUnsupported, "{}: metadata key '{}.{}' must be one integer, got {}", path_, arch_, key,
         v.is_array() ? "an array" : json_text(v));
  return v.get<int64_t>();
}

double GgufMetadata::number(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = at(key);
  if (!v.is_number()) fail(ErrorKind::kBadInput, "{}: metadata key '{}.{}' must be a number", path_, arch_, key);
  return v.get<double>();
}

std::string GgufMetadata::string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = at(key);
  if (!v.is_string()) fail(ErrorKind::kBadInput, "{}: metadata key '{}.{}' must be a string", path_, arch_, key);
  return v.get<std::string>();
}

std::vector<int64_t> GgufMetadata::per_layer(const std::string& key, int64_t layers) const {
  const nlohmann::json& v = at(key);
  if (v.is_number_integer()) return std::vector<int64_t>(size_t(layers), v.get<int64_t>());
  if (!v.is_array() || int64_t(v.size()) != layers)
    fail(ErrorKind::kBadInput, "{}: metadata key '{}.{}' must be one integer or an array of {} (one per layer)", path_,
         arch_, key, layers);
  std::vector<int64_t> out;
  for (const nlohmann::json& e : v) {
    if (!e.is_number_integer())
      fail(ErrorKind::kBadInput, "{}: metadata key '{}.{}' must hold integers, got {}", path_, arch_, key, json_text(e));
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<bool> GgufMetadata::flags(const std::string& key, int64_t layers) const {
  const nlohmann::json& v = at(key);
  if (!v.is_array() || int64_t(v.size()) != layers)
    fail(ErrorKind::kBadInput, "{}: metadata key '{}.{}' must be an array of {} booleans (one per layer)", path_, arch_,
         key, layers);
  std::vector<bool> out;
  for (const nlohmann::json& e : v) {
    if (!e.is_boolean())
      fail(ErrorKind::kBadInput, "{}: metadata key '{}.{}' must hold booleans, got {}", path_, arch_, key, json_text(e));
    out.push_back(e.get<bool>());
  }
  return out;
}

std::vector<double> GgufMetadata::numbers(const std::string& key) const {
  const nlohmann::json& v = at(key);
  std::vector<double> out;
  if (v.is_array())
    for (const nlohmann::json& e : v) {
      if (!e.is_number()) break;
      out.push_back(e.get<double>());
    }
  if (!v.is_array() || out.size() != v.size())
    fail(ErrorKind::kBadInput, "{}: metadata key '{}.{}' must be an array of numbers", path_, arch_, key);
  return out;
}

int64_t GgufMetadata::token_id(const std::string& text) const {
  const auto tokens = kv_.find("tokenizer.ggml.tokens");
  if (tokens == kv_.end() || !tokens->is_array()) return -1;
  for (size_t i = 0; i < tokens->size(); ++i)
    if ((*tokens)[i].is_string() && (*tokens)[i].get_ref<const std::string&>() == text) return int64_t(i);
  return -1;
}

}  // namespace nextn
