// server/structured_output.h — the request fields that constrain the output to a grammar:
// OpenAI's response_format ({"type": "json_object"} or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict"}}), llama-server's `json_schema` and
// `grammar` (GBNF), and, on chat, tool_choice "required" or a named function (the output
// is then one Hermes tool call, <tool_call>{"name": ..., "arguments": ...}</tool_call>,
// whose arguments follow the tool's parameter schema; output_parser.cc parses it into
// tool_calls as usual). Problems are 400s naming the field, the schema keyword with its
// JSON pointer, or the grammar's line:column.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "grammar/grammar.h"

namespace nextn::server {

struct StructuredOutput {
  std::shared_ptr<const grammar::Grammar> grammar;  // null: the output is free text
  std::string source;                               // the field it came from (for messages)
  std::string text;                                 // its GBNF text (the key of the backend's grammar cache)
};

// `tools`/`tool_choice`: the request's, after parse_tools (null when absent).
StructuredOutput parse_structured_output(const nlohmann::ordered_json& body, const nlohmann::ordered_json& tools,
                                         const nlohmann::ordered_json& tool_choice, bool chat);

}  // namespace nextn::server
