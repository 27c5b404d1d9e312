// server/responses.h — OpenAI response objects: chat completions, legacy
// completions, stream chunks, usage, logprobs and llama-server style timings.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/output_parser.h"

namespace nextn::server {

// Response identity shared by every chunk of one request.
struct ResponseIds {
  std::string id;      // chatcmpl-... / cmpl-...
  int64_t created = 0; // unix seconds
  std::string model;
};
ResponseIds new_response_ids(bool chat, const std::string& model);

const char* finish_reason_text(FinishReason reason, bool tool_calls);

nlohmann::ordered_json timings_json(const Timings& t);
nlohmann::ordered_json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens);

// logprobs.content entries for chat ({"token","logprob","bytes","top_logprobs"}).
nlohmann::ordered_json chat_logprobs(const std::vector<TokenEvent>& tokens, const std::vector<std::string>& texts,
                             const std::vector<std::vector<std::string>>& top_texts);
// Legacy completions logprobs ({"tokens","token_logprobs","top_logprobs","text_offset"}).
nlohmann::ordered_json completion_logprobs(const std::vector<TokenEvent>& tokens, const std::vector<std::string>& texts,
                                   const std::vector<std::vector<std::string>>& top_texts, size_t text_offset);

nlohmann::ordered_json tool_calls_json(const std::vector<ParsedToolCall>& calls, bool stream);

nlohmann::ordered_json chat_chunk(const ResponseIds& ids, const nlohmann::ordered_json& delta, const nlohmann::ordered_json& finish_reason);
nlohmann::ordered_json completion_chunk(const ResponseIds& ids, const std::string& text, const nlohmann::ordered_json& finish_reason);

// The non-streamed answers. chat: `raw` (the model's output) goes through the parser
// into content, reasoning_content and tool_calls. logprobs: null when not requested.
nlohmann::ordered_json chat_completion_body(const ResponseIds& ids, OutputParser& parser, const std::string& raw,
                                            const nlohmann::ordered_json& logprobs, FinishReason finish,
                                            const nlohmann::ordered_json& usage, const nlohmann::ordered_json& timings);
nlohmann::ordered_json text_completion_body(const ResponseIds& ids, const std::string& text,
                                            const nlohmann::ordered_json& logprobs, FinishReason finish,
                                            const nlohmann::ordered_json& usage, const nlohmann::ordered_json& timings);
// The stream's last data chunk when usage was asked for: no choices, usage and timings.
nlohmann::ordered_json usage_chunk(const ResponseIds& ids, bool chat, const nlohmann::ordered_json& usage,
                                   const nlohmann::ordered_json& timings);

}  // namespace nextn::server
