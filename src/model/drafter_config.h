// model/drafter_config.h — a drafter checkpoint's config read before loading it, so the
// drafter registry can tell the kinds apart (Gemma 4 assistant, EAGLE-3, DFlash, a plain
// draft model) from a directory of safetensors or a GGUF file alike.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace nextn {

// DIR/config.json, or the config a GGUF file (or a directory holding one) derives from
// its metadata; an empty object when neither exists.
nlohmann::json drafter_config(const std::string& dir);

// config["architectures"][0], or "" when absent.
std::string first_architecture(const nlohmann::json& config);

}  // namespace nextn
