// server/output_parser.h — splits generated text into content, reasoning and tool calls.
// Incremental (fed streamed text pieces): text inside <think>...</think> goes to
// reasoning_content; with tools enabled, everything from the first <tool_call>
// (Hermes JSON or Qwen3-Coder XML <function=...><parameter=...>) or bare
// <function=...> is held back and parsed into OpenAI tool_calls at the end. Text
// that only might be the start of a tag is held until it is decided.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace nextn::server {

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};

struct OutputDelta {
  std::string content;
  std::string reasoning;
  bool empty() const { return content.empty() && reasoning.empty(); }
};

class OutputParser {
 public:
  // starts_in_reasoning: the prompt already opened a <think> block.
  // tools: the request's tools (null/empty: no tool-call parsing); used for
  // typing Qwen3-Coder XML parameter values.
  OutputParser(bool starts_in_reasoning, const nlohmann::ordered_json& tools);

  OutputDelta feed(const std::string& text);
  // Flushes held-back text and parses tool calls.
  OutputDelta finish();
  const std::vector<ParsedToolCall>& tool_calls() const { return tool_calls_; }

 private:
  enum class State { kStart, kReasoning, kAfterReasoning, kContent, kTools };
  void process(OutputDelta& out, bool final);

  State state_;
  bool parse_tools_;
  nlohmann::ordered_json tools_;
  std::string pending_;   // undecided text
  std::string tool_text_; // everything from the first tool-call tag
  std::vector<ParsedToolCall> tool_calls_;
};

// Parses tool calls out of `text` (one or more <tool_call> blocks or bare
// <function=...> blocks). Returns false when the text holds none or is
// malformed; `rest` receives the non-tool text between/after blocks.
bool parse_tool_calls(const std::string& text, const nlohmann::ordered_json& tools, std::vector<ParsedToolCall>& calls,
                      std::string& rest);

}  // namespace nextn::server
