// bench/client.h — the benchmark's OpenAI-compatible client: one streaming chat
// request timed to the first content chunk, tokens counted from `usage`
// (stream_options.include_usage), speculative statistics from `timings`.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace nextn::bench {

struct StreamResult {
  bool ok = false;
  std::string error;
  double ttft_s = 0;          // send → first chunk carrying content
  double total_s = 0;         // send → [DONE]
  int prompt_tokens = 0;      // usage.prompt_tokens
  int completion_tokens = 0;  // usage.completion_tokens (0 when the server sends no usage)
  int content_chunks = 0;     // SSE frames that carried content (what mtp_bench counted)
  std::string text;
  nlohmann::json timings;     // the last `timings` object seen (nextn, llama-server)
};

class Client {
 public:
  explicit Client(const std::string& base_url, const std::string& api_key = "");

  // `extra`: fields merged into the request body (a prompt kind's response_format).
  StreamResult stream_chat(const nlohmann::json& messages, int max_tokens, double temperature, double timeout_s,
                           const nlohmann::json& extra = nlohmann::json::object());
  // Non-streamed chat; returns the parsed response or an error object.
  nlohmann::json chat(const nlohmann::json& messages, int max_tokens, double temperature, double timeout_s);
  // Token count via POST /tokenize (nextn, llama-server, vLLM), if the server has it.
  std::optional<int> count_tokens(const std::string& text);
  std::optional<nlohmann::json> get_json(const std::string& path);
  std::optional<std::string> get_text(const std::string& path);
  std::string model_id();  // first id of /v1/models (asked once), or "default"

 private:
  std::string base_url_, api_key_;
  std::string model_;  // cached /v1/models id
};

}  // namespace nextn::bench
