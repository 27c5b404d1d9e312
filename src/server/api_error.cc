// server/api_error.cc — constructors for the OpenAI error object.
#include "server/api_error.h"

#include <fmt/format.h>

namespace nextn::server {

using json = nlohmann::ordered_json;

json ApiError::to_json() const {
  json e = {{"message", what()},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}};
  for (auto& [k, v] : extra.items()) e[k] = v;
  return json{{"error", e}};
}

void bad_field(const std::string& field, const std::string& message) {
  throw ApiError(400, "invalid_request_error", field + ": " + message, field, "invalid_value");
}

ApiError bad_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", message, param);
}

ApiError unauthorized() {
  return ApiError(401, "authentication_error", "Invalid or missing API key (send 'Authorization: Bearer <key>')", {},
                  "invalid_api_key");
}

ApiError not_found(const std::string& message, const std::string& code) {
  return ApiError(404, "not_found_error", message, {}, code);
}

ApiError payload_too_large(size_t limit) {
  return ApiError(413, "invalid_request_error", fmt::format("Request body too large (limit {} bytes)", limit), {},
                  "payload_too_large");
}

ApiError unavailable(const std::string& message) {
  return ApiError(503, "unavailable_error", message, {}, "unavailable");
}

ApiError context_exceeded(int n_prompt_tokens, int n_ctx) {
  ApiError e(400, "exceed_context_size_error",
             fmt::format("This model's maximum context length is {} tokens. However, the prompt has {} tokens.",
                         n_ctx, n_prompt_tokens),
             "messages", "context_length_exceeded");
  e.extra = {{"n_prompt_tokens", n_prompt_tokens}, {"n_ctx", n_ctx}};
  return e;
}

ApiError internal_error(const std::string& message) {
  return ApiError(500, "server_error", message, {}, "internal_error");
}

ApiError from_error(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::kBadInput: return bad_request(error.what());
    case ErrorKind::kNotFound: return not_found(error.what());
    case ErrorKind::kUnsupported: return ApiError(400, "invalid_request_error", error.what(), {}, "unsupported");
    case ErrorKind::kResource: return unavailable(error.what());
    case ErrorKind::kInternal: break;
  }
  return internal_error(error.what());
}

}  // namespace nextn::server
