// server/json_fields.cc — depth-limited body parsing and checked field readers.
#include "server/json_fields.h"

#include <cmath>

#include "server/api_error.h"

namespace nextn::server {

using json = nlohmann::ordered_json;

int json_depth(const std::string& text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        max_depth = depth;
        if (max_depth > limit) return max_depth;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

json parse_body(const std::string& body, int max_depth) {
  if (body.empty()) throw bad_request("Request body is empty; expected a JSON object");
  if (json_depth(body, max_depth) > max_depth)
    throw bad_request("Request JSON is nested deeper than " + std::to_string(max_depth) + " levels");
  json value = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Re-parse to get the position for the message.
    try {
      json again = json::parse(body);
    } catch (const json::parse_error& e) {
      throw bad_request(std::string("Invalid JSON in request body: ") + e.what());
    }
    throw bad_request("Invalid JSON in request body");
  }
  if (!value.is_object()) throw bad_request("Request body must be a JSON object");
  return value;
}

static const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> opt_number(const json& obj, const char* name, double lo, double hi) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_field(name, "expected a number");
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) bad_field(name, fmt::format("must be between {} and {}", lo, hi));
  return x;
}

std::optional<int64_t> opt_int(const json& obj, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
      bad_field(name, fmt::format("must be between {} and {}", lo, hi));
    x = v->get<int64_t>();
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    // 5.0 is accepted as 5; 5.5 and 1e300 are not.
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9e18) bad_field(name, "expected an integer");
    x = int64_t(d);
  } else {
    bad_field(name, "expected an integer");
  }
  if (x < lo || x > hi) bad_field(name, fmt::format("must be between {} and {}", lo, hi));
  return x;
}

std::optional<bool> opt_bool(const json& obj, const char* name) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_field(name, "expected true or false");
  return v->get<bool>();
}

std::optional<std::string> opt_string(const json& obj, const char* name, const std::string& where) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_field(where.empty() ? std::string(name) : where + "." + name, "expected a string");
  return v->get<std::string>();
}

std::string dump_json(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace nextn::server
