// server/api_error.h — the OpenAI error object and its HTTP status.
// Every failure the server reports (bad JSON, invalid field, wrong key, unknown
// route/model, body too large, context overflow, overload) becomes an ApiError
// rendered as {"error":{"message","type","param","code"}}.
#pragma once
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

#include "util/error.h"

namespace nextn::server {

struct ApiError : std::runtime_error {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field ("" → null)
  std::string code;   // machine-readable code ("" → null)
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // merged into the error object

  ApiError(int status, std::string type, std::string message, std::string param = {}, std::string code = {})
      : std::runtime_error(std::move(message)),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}

  nlohmann::ordered_json to_json() const;
};

// 400 naming the field: "<field>: <message>".
[[noreturn]] void bad_field(const std::string& field, const std::string& message);
ApiError bad_request(const std::string& message, const std::string& param = {});
ApiError unauthorized();
ApiError not_found(const std::string& message, const std::string& code = "not_found");
ApiError payload_too_large(size_t limit);
ApiError unavailable(const std::string& message);
ApiError context_exceeded(int n_prompt_tokens, int n_ctx);
ApiError internal_error(const std::string& message);
// Maps an nextn::Error raised below the server (engine, tokenizer, template).
ApiError from_error(const Error& error);

}  // namespace nextn::server
