// io/json_file.h — reading a JSON file with errors that name the file.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace nextn {

// Throws kNotFound when missing, kBadInput (with the parser's message) when malformed.
nlohmann::json read_json_file(const std::string& path);

}  // namespace nextn
