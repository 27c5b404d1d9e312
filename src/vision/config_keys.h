// vision/config_keys.h — reading a tower's vision_config values, each bad value a kBadInput
// that names its key (shared by the families' config readers).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>

#include "util/error.h"

namespace nextn::vision {

// A positive integer (at most 2^20); `fallback` when the key is absent or null.
inline int config_int(const nlohmann::json& j, const char* key, int fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1 || j[key].get<int64_t>() > (1 << 20))
    fail(ErrorKind::kBadInput, "vision_config.{}: expected a positive integer", key);
  return j[key].get<int>();
}

// true / false; false when the key is absent or null.
inline bool config_bool(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return false;
  if (!j[key].is_boolean()) fail(ErrorKind::kBadInput, "vision_config.{}: expected true or false", key);
  return j[key].get<bool>();
}

}  // namespace nextn::vision
