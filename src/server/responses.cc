// server/responses.cc — builders for the OpenAI response shapes.
#include "server/responses.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

namespace nextn::server {

using json = nlohmann::ordered_json;

ResponseIds new_response_ids(bool chat, const std::string& model) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[64];
  uint64_t x = (++counter + salt) * 0x9e3779b97f4a7c15ull;
  std::snprintf(buf, sizeof buf, "%s-%016llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)x);
  ResponseIds ids;
  ids.id = buf;
  ids.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  ids.model = model;
  return ids;
}

const char* finish_reason_text(FinishReason reason, bool tool_calls) {
  if (tool_calls) return "tool_calls";
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "length";  // cut short (server shutdown)
    default: return "stop";
  }
}

static double per_second(int n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; }
static double round3(double x) { return std::round(x * 1000.0) / 1000.0; }

json timings_json(const Timings& t) {
  json j = {{"cache_n", t.cache_n},
            {"prompt_n", t.prompt_n},
            {"prompt_ms", round3(t.prompt_ms)},
            {"prompt_per_token_ms", t.prompt_n > 0 ? round3(t.prompt_ms / t.prompt_n) : 0.0},
            {"prompt_per_second", round3(per_second(t.prompt_n, t.prompt_ms))},
            {"predicted_n", t.predicted_n},
            {"predicted_ms", round3(t.predicted_ms)},
            {"predicted_per_token_ms", t.predicted_n > 0 ? round3(t.predicted_ms / t.predicted_n) : 0.0},
            {"predicted_per_second", round3(per_second(t.predicted_n, t.predicted_ms))}};
  if (!t.kv_type.empty()) j["kv_type"] = t.kv_type;
  if (t.image_n > 0) {
    j["image_n"] = t.image_n;
    j["image_cached_n"] = t.image_cached_n;
    j["image_ms"] = round3(t.image_ms);
  }
  const SpeculativeCounters& c = t.speculative;
  if (c.draft_tokens > 0 || c.drafts > 0) {
    if (!t.drafter.empty()) j["drafter"] = t.drafter;
    j["draft_n"] = c.draft_tokens;
    j["draft_n_accepted"] = c.accepted;
    j["draft_acceptance_rate"] = round3(c.acceptance_rate());
    j["draft_steps"] = c.drafts;
    j["mean_acceptance_length"] = c.drafts > 0 ? round3(c.mean_accepted_length()) : 1.0;
    json per_pos = json::array();
    for (size_t k = 0; k < c.accepted_per_pos.size(); ++k) {
      uint64_t drafted = k < c.drafted_per_pos.size() ? c.drafted_per_pos[k] : 0;
      per_pos.push_back(drafted > 0 ? round3(double(c.accepted_per_pos[k]) / double(drafted)) : 0.0);
    }
    j["draft_accepted_per_pos"] = c.accepted_per_pos;
    j["draft_drafted_per_pos"] = c.drafted_per_pos;
    j["draft_acceptance_per_pos"] = per_pos;
    if (!c.by_drafter.empty()) {
      json parts = json::object();
      for (const auto& d : c.by_drafter)
        parts[d.name] = {{"draft_n", d.draft_tokens}, {"draft_n_accepted", d.accepted}, {"draft_steps", d.drafts}};
      j["drafters"] = parts;
    }
  }
  // Decode steps per depth the planner (or a fixed depth) chose: index = drafts in the step.
  if (!t.draft_depths.empty()) j["draft_depths"] = t.draft_depths;
  if (t.synthetic_accept >= 0) j["synthetic_accept"] = t.synthetic_accept;
  return j;
}

json usage_json(int prompt_tokens, int completion_tokens, int cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

static json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json chat_logprobs(const std::vector<TokenEvent>& tokens, const std::vector<std::string>& texts,
                   const std::vector<std::vector<std::string>>& top_texts) {
  json content = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    json top = json::array();
    for (size_t k = 0; k < tokens[i].top.size(); ++k) {
      const std::string& tt = i < top_texts.size() && k < top_texts[i].size() ? top_texts[i][k] : std::string();
      top.push_back({{"token", tt}, {"logprob", tokens[i].top[k].logprob}, {"bytes", bytes_of(tt)}});
    }
    const std::string& text = i < texts.size() ? texts[i] : std::string();
    content.push_back({{"token", text}, {"logprob", tokens[i].logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs(const std::vector<TokenEvent>& tokens, const std::vector<std::string>& texts,
                         const std::vector<std::vector<std::string>>& top_texts, size_t text_offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  size_t off = text_offset;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& text = i < texts.size() ? texts[i] : std::string();
    toks.push_back(text);
    lps.push_back(tokens[i].logprob);
    json top = json::object();
    for (size_t k = 0; k < tokens[i].top.size(); ++k) {
      const std::string& tt = i < top_texts.size() && k < top_texts[i].size() ? top_texts[i][k] : std::string();
      top[tt] = tokens[i].top[k].logprob;
    }
    tops.push_back(top);
    offs.push_back(off);
    off += text.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json tool_calls_json(const std::vector<ParsedToolCall>& calls, bool stream) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (stream) c["index"] = int(i);
    out.push_back(c);
  }
  return out;
}

// Every response object and stream chunk starts with these fields, in this order.
static json response_head(const ResponseIds& ids, const char* object, json choices) {
  return json{{"id", ids.id},
              {"object", object},
              {"created", ids.created},
              {"model", ids.model},
              {"system_fingerprint", "nextn-" NEXTN_VERSION},
              {"choices", std::move(choices)}};
}

json chat_chunk(const ResponseIds& ids, const json& delta, const json& finish_reason) {
  return response_head(ids, "chat.completion.chunk",
                       json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}}));
}

json completion_chunk(const ResponseIds& ids, const std::string& text, const json& finish_reason) {
  return response_head(ids, "text_completion",
                       json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}}));
}

// The response object of either endpoint around its choices (the usage chunk of a
// stream has none).
static json response_object(const ResponseIds& ids, const char* object, json choices, const json& usage,
                            const json& timings) {
  json j = response_head(ids, object, std::move(choices));
  j["usage"] = usage;
  j["timings"] = timings;
  return j;
}

json chat_completion_body(const ResponseIds& ids, OutputParser& parser, const std::string& raw, const json& logprobs,
                          FinishReason finish, const json& usage, const json& timings) {
  OutputDelta d1 = parser.feed(raw);
  OutputDelta d2 = parser.finish();
  std::string content = d1.content + d2.content;
  std::string reasoning = d1.reasoning + d2.reasoning;
  const auto& calls = parser.tool_calls();
  json message = {{"role", "assistant"}};
  bool blank = content.find_first_not_of(" \n\r\t") == std::string::npos;
  message["content"] = (!calls.empty() && blank) ? json(nullptr) : json(content);
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (!calls.empty()) message["tool_calls"] = tool_calls_json(calls, false);
  json choice = {{"index", 0},
                 {"message", message},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_reason_text(finish, !calls.empty())}};
  return response_object(ids, "chat.completion", json::array({choice}), usage, timings);
}

json text_completion_body(const ResponseIds& ids, const std::string& text, const json& logprobs, FinishReason finish,
                          const json& usage, const json& timings) {
  json choice = {{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_reason_text(finish, false)}};
  return response_object(ids, "text_completion", json::array({choice}), usage, timings);
}

json usage_chunk(const ResponseIds& ids, bool chat, const json& usage, const json& timings) {
  return response_object(ids, chat ? "chat.completion.chunk" : "text_completion", json::array(), usage, timings);
}

}  // namespace nextn::server
