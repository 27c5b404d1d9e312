// io/json_file.h — reading a JSON file with errors that name the file.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace nextn {

// Throws kNotFound when missing, kBadInput (with the parser's message) when malformed.
nlohmann::json read_json_file(const std::string& path);

// A value as JSON text for an error message. Strings from a damaged file may hold
// invalid UTF-8 (GGUF strings are raw bytes): those bytes become U+FFFD instead of
// making the message itself throw.
inline std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace nextn
