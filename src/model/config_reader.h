// model/config_reader.h — typed access to config.json keys with errors that name
// the file and the key ("<dir>/config.json: missing key 'hidden_size'").
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "util/error.h"

namespace nextn {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string path) : json_(json), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return json_; }
  // Present and not null.
  bool has(const std::string& key) const;

  int require_int(const std::string& key) const;
  int get_int(const std::string& key, int fallback) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // A list of strings; empty when the key is absent.
  std::vector<std::string> get_strings(const std::string& key) const;

  template <typename... Args>
  [[noreturn]] void error(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) const {
    throw Error(kind, path_ + ": " + fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  const nlohmann::json& json_;
  std::string path_;
};

}  // namespace nextn
