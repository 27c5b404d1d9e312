// server/structured_output.h — the request fields that constrain the output to a grammar:
// OpenAI's response_format ({"type": "json_object"} or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict"}}), llama-server's `json_schema` and
// `grammar` (GBNF), and, on chat, tool_choice "required" or a named function (the output
// is then one Hermes tool call, <tool_call>{"name": ..., "arguments": ...}</tool_call>,
// whose arguments follow the tool's parameter schema; output_parser.cc parses it into
// tool_calls as usual). Problems are 400s naming the field, the schema keyword with its
// JSON pointer, or the grammar's line:column; a limit passed is a 400 naming its flag.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "grammar/grammar.h"
#include "grammar/limits.h"

namespace nextn::server {

struct StructuredOutput {
  std::shared_ptr<const grammar::Grammar> grammar;  // null: the output is free text
  std::string source;                               // the field it came from (for messages)
  std::string text;                                 // its GBNF text (the key of the backend's grammar cache)
  grammar::GrammarLimits limits;                    // what compiling and matching it may cost
};

// `tools`/`tool_choice`: the request's, after parse_tools (null when absent).
StructuredOutput parse_structured_output(const nlohmann::ordered_json& body, const nlohmann::ordered_json& tools,
                                         const nlohmann::ordered_json& tool_choice, bool chat,
                                         const grammar::GrammarLimits& limits);

// The 400 for a grammar limit passed (code "grammar_limit"), naming `field` and the flag.
[[noreturn]] void grammar_limit_error(const std::string& field, const grammar::GrammarLimitError& e);

}  // namespace nextn::server
