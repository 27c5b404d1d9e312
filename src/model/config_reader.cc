// model/config_reader.cc — typed config.json access.
#include "model/config_reader.h"

#include <limits>

namespace nextn {

bool ConfigReader::has(const std::string& key) const {
  auto it = json_.find(key);
  return it != json_.end() && !it->is_null();
}

int ConfigReader::require_int(const std::string& key) const {
  if (!has(key)) error(ErrorKind::kBadInput, "missing key '{}'", key);
  return get_int(key, 0);
}

int ConfigReader::get_int(const std::string& key, int fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_number_integer()) error(ErrorKind::kBadInput, "key '{}' must be an integer, got {}", key, v.dump());
  int64_t x = v.get<int64_t>();
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    error(ErrorKind::kBadInput, "key '{}' is out of range: {}", key, x);
  return static_cast<int>(x);
}

double ConfigReader::get_double(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_number()) error(ErrorKind::kBadInput, "key '{}' must be a number, got {}", key, v.dump());
  return v.get<double>();
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_boolean()) error(ErrorKind::kBadInput, "key '{}' must be true or false, got {}", key, v.dump());
  return v.get<bool>();
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_string()) error(ErrorKind::kBadInput, "key '{}' must be a string, got {}", key, v.dump());
  return v.get<std::string>();
}

std::vector<std::string> ConfigReader::get_strings(const std::string& key) const {
  std::vector<std::string> out;
  if (!has(key)) return out;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_array()) error(ErrorKind::kBadInput, "key '{}' must be a list of strings", key);
  for (const auto& item : v) {
    if (!item.is_string()) error(ErrorKind::kBadInput, "key '{}' must be a list of strings", key);
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace nextn
