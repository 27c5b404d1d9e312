// model/drafter_config.cc — see drafter_config.h.
#include "model/drafter_config.h"

#include <filesystem>

#include "io/checkpoint.h"
#include "io/json_file.h"

namespace nextn {

nlohmann::json drafter_config(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return nlohmann::json::object();
  const std::filesystem::path json = std::filesystem::path(dir) / "config.json";
  if (std::filesystem::exists(json, ec)) return read_json_file(json.string());
  // A GGUF file (or a directory holding one): its config derived from the metadata.
  if (std::filesystem::is_directory(dir, ec)) {
    bool gguf = false;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) gguf |= entry.path().extension() == ".gguf";
    if (!gguf) return nlohmann::json::object();
  } else if (std::filesystem::path(dir).extension() != ".gguf") {
    return nlohmann::json::object();
  }
  return Checkpoint::open(dir)->config();
}

std::string first_architecture(const nlohmann::json& config) {
  if (config.is_object() && config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string())
    return config["architectures"][0].get<std::string>();
  return "";
}

}  // namespace nextn
