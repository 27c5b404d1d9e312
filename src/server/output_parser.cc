// server/output_parser.cc — <think> splitting and Hermes / Qwen3-Coder tool-call parsing.
#include "server/output_parser.h"

#include <atomic>
#include <cstdio>

namespace nextn::server {

using json = nlohmann::ordered_json;

namespace {

const std::string kThinkOpen = "<think>";
const std::string kThinkClose = "</think>";
const std::string kToolOpen = "<tool_call>";
const std::string kToolClose = "</tool_call>";
const std::string kFunctionOpen = "<function=";

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_suffix(const std::string& s, const std::string& tag) {
  size_t max_len = std::min(s.size(), tag.size() - 1);
  for (size_t len = max_len; len > 0; --len)
    if (s.compare(s.size() - len, len, tag, 0, len) == 0) return len;
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// Removes exactly one leading and one trailing newline (Qwen3-Coder's layout).
std::string strip_one_newline(std::string s) {
  if (!s.empty() && s.front() == '\n') s.erase(0, 1);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

std::string new_call_id() {
  static std::atomic<uint64_t> counter{0};
  char buf[40];
  std::snprintf(buf, sizeof buf, "call_%016llx", (unsigned long long)(0x9e3779b97f4a7c15ull * ++counter));
  return buf;
}

const json* tool_parameter_schema(const json& tools, const std::string& fn, const std::string& param) {
  if (!tools.is_array()) return nullptr;
  for (const json& t : tools) {
    if (!t.is_object() || !t.contains("function")) continue;
    const json& f = t["function"];
    if (f.value("name", "") != fn) continue;
    if (f.contains("parameters") && f["parameters"].is_object() && f["parameters"].contains("properties") &&
        f["parameters"]["properties"].is_object() && f["parameters"]["properties"].contains(param))
      return &f["parameters"]["properties"][param];
  }
  return nullptr;
}

// Hermes: {"name": ..., "arguments": {...}}
bool parse_hermes(const std::string& body, ParsedToolCall& call) {
  json j = json::parse(trim(body), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call.name = j["name"].get<std::string>();
  json args = j.contains("arguments") ? j["arguments"] : (j.contains("parameters") ? j["parameters"] : json::object());
  if (args.is_string()) {
    json parsed = json::parse(args.get<std::string>(), nullptr, false);
    call.arguments = parsed.is_discarded() ? json(args).dump() : parsed.dump();
  } else {
    call.arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return true;
}

// Qwen3-Coder: <function=name><parameter=key>value</parameter>...</function>
bool parse_xml_function(const std::string& body, const json& tools, ParsedToolCall& call) {
  size_t f = body.find(kFunctionOpen);
  if (f == std::string::npos) return false;
  size_t name_end = body.find('>', f);
  if (name_end == std::string::npos) return false;
  call.name = trim(body.substr(f + kFunctionOpen.size(), name_end - f - kFunctionOpen.size()));
  if (call.name.empty()) return false;
  size_t fn_end = body.find("</function>", name_end);
  std::string inner = body.substr(name_end + 1, fn_end == std::string::npos ? std::string::npos : fn_end - name_end - 1);
  json args = json::object();
  size_t pos = 0;
  const std::string popen = "<parameter=";
  while ((pos = inner.find(popen, pos)) != std::string::npos) {
    size_t key_end = inner.find('>', pos);
    if (key_end == std::string::npos) return false;
    std::string key = trim(inner.substr(pos + popen.size(), key_end - pos - popen.size()));
    size_t val_end = inner.find("</parameter>", key_end);
    size_t next = inner.find(popen, key_end);
    if (val_end == std::string::npos || (next != std::string::npos && next < val_end)) val_end = next;
    std::string value = strip_one_newline(inner.substr(key_end + 1, val_end == std::string::npos ? std::string::npos : val_end - key_end - 1));
    const json* schema = tool_parameter_schema(tools, call.name, key);
    std::string type = schema && schema->is_object() && (*schema).contains("type") && (*schema)["type"].is_string()
                           ? (*schema)["type"].get<std::string>()
                           : "string";
    if (type == "string") {
      args[key] = value;
    } else {
      json parsed = json::parse(value, nullptr, false);
      args[key] = parsed.is_discarded() ? json(value) : parsed;
    }
    if (val_end == std::string::npos) break;
    pos = val_end;
  }
  call.arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
  return true;
}

bool parse_one(const std::string& body, const json& tools, ParsedToolCall& call) {
  if (body.find(kFunctionOpen) != std::string::npos && parse_xml_function(body, tools, call)) return true;
  return parse_hermes(body, call);
}

}  // namespace

bool parse_tool_calls(const std::string& text, const json& tools, std::vector<ParsedToolCall>& calls,
                      std::string& rest) {
  calls.clear();
  rest.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find(kToolOpen, pos);
    size_t fopen = text.find(kFunctionOpen, pos);
    if (open == std::string::npos && fopen == std::string::npos) {
      rest += text.substr(pos);
      break;
    }
    ParsedToolCall call;
    if (open != std::string::npos && (fopen == std::string::npos || open <= fopen)) {
      rest += text.substr(pos, open - pos);
      size_t body_start = open + kToolOpen.size();
      size_t close = text.find(kToolClose, body_start);
      std::string body = text.substr(body_start, close == std::string::npos ? std::string::npos : close - body_start);
      if (!parse_one(body, tools, call)) return false;
      pos = close == std::string::npos ? text.size() : close + kToolClose.size();
    } else {  // bare <function=...>...</function>
      rest += text.substr(pos, fopen - pos);
      size_t close = text.find("</function>", fopen);
      size_t end = close == std::string::npos ? text.size() : close + std::string("</function>").size();
      if (!parse_xml_function(text.substr(fopen, end - fopen), tools, call)) return false;
      pos = end;
    }
    call.id = new_call_id();
    calls.push_back(std::move(call));
  }
  return !calls.empty();
}

OutputParser::OutputParser(bool starts_in_reasoning, const json& tools)
    : state_(starts_in_reasoning ? State::kReasoning : State::kStart),
      parse_tools_(tools.is_array() && !tools.empty()),
      tools_(tools) {}

OutputDelta OutputParser::feed(const std::string& text) {
  OutputDelta out;
  pending_ += text;
  process(out, false);
  return out;
}

OutputDelta OutputParser::finish() {
  OutputDelta out;
  process(out, true);
  if (state_ == State::kTools) {
    std::string rest;
    if (parse_tool_calls(tool_text_, tools_, tool_calls_, rest)) {
      std::string r = trim(rest);
      if (!r.empty()) out.content += r;
    } else {
      tool_calls_.clear();
      out.content += tool_text_;  // not a valid call: keep the text as content
    }
    tool_text_.clear();
  }
  return out;
}

void OutputParser::process(OutputDelta& out, bool final) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t b = 0;
        while (b < pending_.size() && is_space(pending_[b])) ++b;
        std::string rest = pending_.substr(b);
        if (rest.compare(0, kThinkOpen.size(), kThinkOpen) == 0) {
          pending_ = rest.substr(kThinkOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!final && kThinkOpen.compare(0, rest.size(), rest) == 0) return;  // undecided (incl. empty)
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        size_t close = pending_.find(kThinkClose);
        if (close != std::string::npos) {
          out.reasoning += pending_.substr(0, close);
          pending_ = pending_.substr(close + kThinkClose.size());
          state_ = State::kAfterReasoning;
          continue;
        }
        size_t hold = final ? 0 : partial_suffix(pending_, kThinkClose);
        out.reasoning += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::kAfterReasoning: {
        // Drop the blank lines between </think> and the answer.
        size_t b = 0;
        while (b < pending_.size() && is_space(pending_[b])) ++b;
        pending_.erase(0, b);
        if (pending_.empty() && !final) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent: {
        if (parse_tools_) {
          size_t t = pending_.find(kToolOpen);
          size_t f = pending_.find(kFunctionOpen);
          size_t start = std::min(t, f);
          if (start != std::string::npos) {
            out.content += pending_.substr(0, start);
            tool_text_ = pending_.substr(start);
            pending_.clear();
            state_ = State::kTools;
            continue;
          }
        }
        size_t hold = 0;
        if (!final && parse_tools_)
          hold = std::max(partial_suffix(pending_, kToolOpen), partial_suffix(pending_, kFunctionOpen));
        out.content += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::kTools:
        tool_text_ += pending_;
        pending_.clear();
        return;
    }
  }
}

}  // namespace nextn::server
