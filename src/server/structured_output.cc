// server/structured_output.cc — see structured_output.h.
#include "server/structured_output.h"

#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace nextn::server {

using json = nlohmann::ordered_json;

namespace {

// A tool's parameters sit at /anyOf/i/properties/arguments (or /properties/arguments) of
// the call schema: its own "#/..." references are rebased there (pydantic puts $defs
// beside the parameters and refers to them as "#/$defs/X").
json rebase_refs(const json& schema, const std::string& base) {
  if (schema.is_array()) {
    json out = json::array();
    for (const json& v : schema) out.push_back(rebase_refs(v, base));
    return out;
  }
  if (!schema.is_object()) return schema;
  json out = json::object();
  for (auto& [key, v] : schema.items()) {
    if (key == "$ref" && v.is_string() && !v.get<std::string>().empty() && v.get<std::string>()[0] == '#')
      out[key] = "#" + base + v.get<std::string>().substr(1);
    else out[key] = rebase_refs(v, base);
  }
  return out;
}

[[noreturn]] void bad_schema(const std::string& field, const grammar::SchemaError& e) {
  std::string where = field + (e.pointer.empty() ? "" : e.pointer);
  throw ApiError(400, "invalid_request_error", fmt::format("{}: {}", field, e.what()), where, "invalid_schema");
}

std::string schema_grammar(const json& schema, const std::string& field, const grammar::GrammarLimits& limits) {
  if (!schema.is_object() && !schema.is_boolean()) bad_field(field, "expected a JSON Schema object");
  try {
    return grammar::json_schema_to_gbnf(schema, grammar::Whitespace::kFlexible, limits);
  } catch (const grammar::SchemaError& e) {
    bad_schema(field, e);
  } catch (const grammar::GrammarLimitError& e) {
    grammar_limit_error(field, e);
  }
}

// The grammar a required tool call follows: one call of one of `tools`.
std::string tool_call_grammar(const json& tools, const grammar::GrammarLimits& limits) {
  json calls = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& fn = tools[i]["function"];
    json params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : json::object();
    std::string at = tools.size() == 1 ? "" : "/anyOf/" + std::to_string(i);
    params = rebase_refs(params, at + "/properties/arguments");
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", fn["name"]}}}, {"arguments", params}}},
                     {"required", {"name", "arguments"}}});
  }
  json schema = calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
  std::string body;
  try {
    // One line, as Hermes tool calls are written.
    body = grammar::json_schema_to_gbnf(schema, grammar::Whitespace::kSpace, limits);
  } catch (const grammar::GrammarLimitError& e) {
    grammar_limit_error("tools", e);
  } catch (const grammar::SchemaError& e) {
    // Name the tool's parameters: /anyOf/i/properties/arguments/... → tools[i].function.parameters/...
    std::string p = e.pointer;
    size_t tool = 0;
    if (p.rfind("/anyOf/", 0) == 0) {
      tool = std::stoul(p.substr(7));
      p = p.substr(p.find('/', 7));
    }
    const std::string args = "/properties/arguments";
    p = p.rfind(args, 0) == 0 ? p.substr(args.size()) : p;
    std::string field = fmt::format("tools[{}].function.parameters", tool);
    std::string what = e.what();
    what = what.substr(what.find(": ") + 2);
    throw ApiError(400, "invalid_request_error", fmt::format("{}: {}: {}", field, p.empty() ? "(root)" : p, what),
                   field + p, "invalid_schema");
  }
  // The compiled schema's root becomes the call inside the Hermes tags.
  body.replace(0, std::string("root ::=").size(), "tool-call-json ::=");
  return "root ::= \"<tool_call>\\n\" tool-call-json \"\\n</tool_call>\"\n" + body;
}

std::shared_ptr<const grammar::Grammar> compile(const std::string& gbnf, const std::string& field,
                                                const grammar::GrammarLimits& limits) {
  try {
    return std::make_shared<grammar::Grammar>(grammar::parse_gbnf(gbnf, "root", limits));
  } catch (const grammar::GrammarLimitError& e) {
    grammar_limit_error(field, e);
  } catch (const grammar::GrammarError& e) {
    throw ApiError(400, "invalid_request_error", fmt::format("{}: grammar error at {}", field, e.what()), field,
                   "invalid_grammar");
  }
}

}  // namespace

void grammar_limit_error(const std::string& field, const grammar::GrammarLimitError& e) {
  throw ApiError(400, "invalid_request_error", fmt::format("{}: {} ({} raises the limit)", field, e.what(), e.flag),
                 field, "grammar_limit");
}

StructuredOutput parse_structured_output(const json& body, const json& tools, const json& tool_choice, bool chat,
                                         const grammar::GrammarLimits& limits) {
  std::vector<std::pair<std::string, std::string>> found;  // field, GBNF
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const json& rf = body["response_format"];
    if (!rf.is_object()) bad_field("response_format", "expected an object");
    if (!rf.contains("type") || !rf["type"].is_string())
      bad_field("response_format.type", "expected \"text\", \"json_object\" or \"json_schema\"");
    std::string type = rf["type"].get<std::string>();
    if (type == "json_object") {
      // llama-server lets json_object carry a schema too.
      json schema = rf.contains("schema") && !rf["schema"].is_null() ? rf["schema"] : json{{"type", "object"}};
      found.emplace_back("response_format", schema_grammar(schema, "response_format.schema", limits));
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
        bad_field("response_format.json_schema", "expected an object with a \"schema\"");
      const json& js = rf["json_schema"];
      if (js.contains("name") && !js["name"].is_string()) bad_field("response_format.json_schema.name", "expected a string");
      if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
        bad_field("response_format.json_schema.strict", "expected true or false");
      if (!js.contains("schema") || js["schema"].is_null())
        bad_field("response_format.json_schema.schema", "is required");
      found.emplace_back("response_format", schema_grammar(js["schema"], "response_format.json_schema.schema", limits));
    } else if (type != "text") {
      bad_field("response_format.type", "expected \"text\", \"json_object\" or \"json_schema\", got \"" + type + "\"");
    }
  }
  if (body.contains("json_schema") && !body["json_schema"].is_null())
    found.emplace_back("json_schema", schema_grammar(body["json_schema"], "json_schema", limits));
  if (body.contains("grammar") && !body["grammar"].is_null()) {
    if (!body["grammar"].is_string()) bad_field("grammar", "expected GBNF text (a string)");
    if (!body["grammar"].get<std::string>().empty()) found.emplace_back("grammar", body["grammar"].get<std::string>());
  }
  bool call_required = chat && tools.is_array() && !tools.empty() &&
                       ((tool_choice.is_string() && tool_choice == "required") || tool_choice.is_object());
  if (call_required) found.emplace_back("tool_choice", tool_call_grammar(tools, limits));
  if (found.size() > 1)
    bad_field(found[1].first, fmt::format("cannot be combined with {} (one output constraint per request)", found[0].first));
  StructuredOutput out;
  if (found.empty()) return out;
  out.source = found[0].first;
  out.text = found[0].second;
  out.limits = limits;
  out.grammar = compile(found[0].second, found[0].first, limits);
  return out;
}

}  // namespace nextn::server
