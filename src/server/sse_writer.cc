// server/sse_writer.cc — see sse_writer.h.
#include "server/sse_writer.h"

#include <httplib.h>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace nextn::server {

using json = nlohmann::ordered_json;

namespace {

// How long one provider call waits for news before writing a keep-alive comment.
constexpr double kKeepAliveSeconds = 5.0;

bool write_all(httplib::DataSink& sink, const std::string& text) {
  // Two writes: a write to a connection whose peer has gone fails on the
  // second send, so a disconnect is noticed within the same step.
  if (text.size() > 2) {
    return sink.write(text.data(), text.size() - 2) && sink.write(text.data() + text.size() - 2, 2);
  }
  return sink.write(text.data(), text.size());
}

std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

// One entry of choices[0].nextn.tokens: how the token came and the text it released
// (chat: split into content and reasoning as the delta is; completions: text).
json token_source_json(const TokenPiece& piece, const OutputDelta* delta) {
  json entry = json::object();
  if (piece.is_token) {
    entry["source"] = token_source_name(piece.source);
    entry["position"] = piece.position;
    entry["drafts"] = piece.drafts;
  }
  if (delta) {
    if (!delta->content.empty()) entry["content"] = delta->content;
    if (!delta->reasoning.empty()) entry["reasoning"] = delta->reasoning;
  } else if (!piece.text.empty()) {
    entry["text"] = piece.text;
  }
  return entry;
}

}  // namespace

SseWriter::SseWriter(std::shared_ptr<Generation> generation, ResponsePlan plan, ResponseIds ids, Hooks hooks)
    : gen_(std::move(generation)),
      plan_(std::move(plan)),
      ids_(std::move(ids)),
      hooks_(std::move(hooks)),
      parser_(plan_.opens_think, plan_.chat ? plan_.tools : json()),
      text_offset_(plan_.echo.size()) {}

// With include_usage every chunk carries "usage": null; the usage comes in its own chunk.
json SseWriter::with_usage_slot(json chunk) const {
  if (plan_.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

bool SseWriter::fail_write() {
  if (!finished_) {
    if (hooks_.client_gone) hooks_.client_gone();
    gen_->cancel();
  }
  return false;
}

bool SseWriter::write_next(httplib::DataSink& sink) {
  if (finished_) {
    sink.done();
    return true;
  }
  std::string out;
  if (!sent_role_) {
    sent_role_ = true;
    if (plan_.chat) out += sse(with_usage_slot(chat_chunk(ids_, {{"role", "assistant"}, {"content", ""}}, nullptr)));
    else if (!plan_.echo.empty()) out += sse(with_usage_slot(completion_chunk(ids_, plan_.echo, nullptr)));
    if (!out.empty() && !write_all(sink, out)) return fail_write();
    out.clear();
  }
  GenerationUpdate u;
  if (!gen_->wait(u, kKeepAliveSeconds)) {
    // Idle (queued or slow step): a comment keeps proxies open and detects gone clients.
    if (!write_all(sink, ": keep-alive\n\n")) return fail_write();
    return true;
  }
  json lp = nullptr;
  if (plan_.logprobs && !u.tokens.empty()) {
    lp = plan_.chat ? chat_logprobs(u.tokens, u.token_texts, u.top_texts)
                    : completion_logprobs(u.tokens, u.token_texts, u.top_texts, text_offset_);
  }
  // token_sources: the parser is fed token by token so each token's share of the
  // delta is known; the delta is the same as from feeding the update's text at once.
  json sources = json::array();
  if (plan_.chat) {
    OutputDelta d;
    auto add = [&d](const OutputDelta& part) {
      d.content += part.content;
      d.reasoning += part.reasoning;
    };
    if (plan_.token_sources) {
      for (const TokenPiece& piece : u.pieces) {
        OutputDelta part = parser_.feed(piece.text);
        add(part);
        sources.push_back(token_source_json(piece, &part));
      }
    } else {
      add(parser_.feed(u.text));
    }
    if (u.done) {
      OutputDelta f = parser_.finish();
      add(f);
      if (plan_.token_sources && !f.empty()) {
        TokenPiece released;  // text held back until the end, not a token of its own
        released.is_token = false;
        sources.push_back(token_source_json(released, &f));
      }
    }
    if (!d.empty() || !lp.is_null() || !sources.empty()) {
      json delta = json::object();
      if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
      if (!d.content.empty()) delta["content"] = d.content;
      json chunk = chat_chunk(ids_, delta, nullptr);
      chunk["choices"][0]["logprobs"] = lp;
      if (plan_.token_sources) chunk["choices"][0]["nextn"] = {{"tokens", sources}};
      out += sse(with_usage_slot(chunk));
    }
  } else {
    if (plan_.token_sources)
      for (const TokenPiece& piece : u.pieces) sources.push_back(token_source_json(piece, nullptr));
    if (!u.text.empty() || !lp.is_null() || !sources.empty()) {
      json chunk = completion_chunk(ids_, u.text, nullptr);
      chunk["choices"][0]["logprobs"] = lp;
      if (plan_.token_sources) chunk["choices"][0]["nextn"] = {{"tokens", sources}};
      out += sse(with_usage_slot(chunk));
      text_offset_ += u.text.size();
    }
  }
  if (u.done) {
    finished_ = true;
    if (hooks_.finished) hooks_.finished(u);
    out += final_events(u);
    if (!write_all(sink, out)) return false;
    sink.done();
    return true;
  }
  if (!out.empty() && !write_all(sink, out)) return fail_write();
  return true;
}

// After the last update: the error event, or the tool calls, the finish chunk and
// the usage chunk; then [DONE].
std::string SseWriter::final_events(const GenerationUpdate& u) {
  std::string out;
  if (u.finish == FinishReason::kError) {
    out += sse(internal_error("generation failed: " + u.error).to_json());
  } else if (u.finish == FinishReason::kInvalidRequest) {
    out += sse(ApiError(400, "invalid_request_error", u.error, {}, "grammar_limit").to_json());
  } else {
    bool calls = plan_.chat && !parser_.tool_calls().empty();
    if (calls)
      out += sse(with_usage_slot(chat_chunk(ids_, {{"tool_calls", tool_calls_json(parser_.tool_calls(), true)}}, nullptr)));
    const char* reason = finish_reason_text(u.finish, calls);
    json last = plan_.chat ? chat_chunk(ids_, json::object(), reason) : completion_chunk(ids_, "", reason);
    last["timings"] = timings_json(u.timings);
    out += sse(with_usage_slot(last));
    if (plan_.include_usage)
      out += sse(usage_chunk(ids_, plan_.chat, usage_json(plan_.n_prompt, u.completion_tokens, u.timings.cache_n),
                             timings_json(u.timings)));
  }
  out += "data: [DONE]\n\n";
  return out;
}

}  // namespace nextn::server
