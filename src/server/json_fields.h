// server/json_fields.h — safe, typed access to request JSON.
// Parsing enforces a nesting-depth limit before nlohmann sees the body; field
// readers check type and range and throw ApiError 400 naming the field, so no
// request value can reach the engine unchecked or surface as a 500.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace nextn::server {

// Parses a request body: 400 for empty/invalid JSON (incl. invalid UTF-8), a
// non-object top level, or nesting deeper than max_depth.
nlohmann::ordered_json parse_body(const std::string& body, int max_depth = 64);

// Nesting depth of the arrays/objects in `text` (strings skipped); stops early
// once it exceeds `limit`.
int json_depth(const std::string& text, int limit);

// Readers: nullopt when the field is absent or null; 400 naming `name` when the
// value has the wrong type or lies outside [lo, hi].
std::optional<double> opt_number(const nlohmann::ordered_json& obj, const char* name, double lo, double hi);
std::optional<int64_t> opt_int(const nlohmann::ordered_json& obj, const char* name, int64_t lo, int64_t hi);
std::optional<bool> opt_bool(const nlohmann::ordered_json& obj, const char* name);
// `where`: the path of `obj` in the request (e.g. "messages[2]"), so errors name the field in full.
std::optional<std::string> opt_string(const nlohmann::ordered_json& obj, const char* name, const std::string& where = {});

// JSON text safe for the wire: invalid UTF-8 in strings is replaced, never thrown.
std::string dump_json(const nlohmann::ordered_json& value);

}  // namespace nextn::server
