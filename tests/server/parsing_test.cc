// tests/server/parsing_test.cc — request validation, JSON limits, output parsing
// (<think>, Hermes and Qwen3-Coder tool calls) and stop-string holdback.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/output_parser.h"
#include "server/request.h"

using json = nlohmann::ordered_json;
using namespace nextn;
using namespace nextn::server;

namespace {

// Runs `fn` and returns the ApiError it throws (fails the test if none).
template <typename F>
ApiError error_of(F fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError thrown";
  return ApiError(0, "", "");
}

json chat(json extra) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

}  // namespace

TEST(JsonFields, DepthLimitAndInvalidBodies) {
  EXPECT_EQ(json_depth("{\"a\":[1,{\"b\":\"[[[[\"}]}", 100), 3);
  std::string deep(10000, '[');
  EXPECT_GT(json_depth(deep, 64), 64);
  EXPECT_EQ(error_of([&] { parse_body(deep); }).status, 400);
  EXPECT_EQ(error_of([] { parse_body(""); }).status, 400);
  EXPECT_EQ(error_of([] { parse_body("{\"a\":"); }).status, 400);
  EXPECT_EQ(error_of([] { parse_body("[1,2]"); }).status, 400);
  EXPECT_EQ(error_of([] { parse_body("{\"a\":\"\xff\xfe\"}"); }).status, 400);  // invalid UTF-8
  EXPECT_TRUE(parse_body("{\"a\":1}").is_object());
}

TEST(JsonFields, DumpReplacesInvalidUtf8) {
  json j = std::string("ok\xff");
  EXPECT_NO_THROW(dump_json(j));
}

TEST(Request, ValidChatRequest) {
  RequestDefaults d;
  d.sampling.temperature = 0.5f;
  ParsedRequest r = parse_chat_request(
      chat({{"max_completion_tokens", 7}, {"top_k", 5}, {"stop", "END"}, {"seed", 42}, {"stream", true},
            {"stream_options", {{"include_usage", true}}}, {"unknown_field", {1, 2, 3}}}),
      d);
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);  // server default kept
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.sampling.has_seed);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.messages[0]["content"], "hi");
}

TEST(Request, ContentPartsAreJoined) {
  json body = {{"messages",
                {{{"role", "user"},
                  {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}};
  ParsedRequest r = parse_chat_request(body, {});
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
  body["messages"][0]["content"][1] = {{"type", "input_audio"}, {"input_audio", {{"data", "x"}}}};
  EXPECT_EQ(error_of([&] { parse_chat_request(body, {}); }).param, "messages[0].content[1].type");
}

// A 2×1 PNG: one red pixel, one blue.
const char* kPng2x1 =
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4zwAE/wEHAAH/4iOeWQAAAABJRU5ErkJggg==";

TEST(Request, ImagePartsAreDecodedWithTheirPlace) {
  json image = {{"type", "image_url"}, {"image_url", {{"url", kPng2x1}, {"detail", "low"}}}};
  json body = {{"messages",
                {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, image}}},
                 {{"role", "assistant"}, {"content", "ok"}},
                 {{"role", "user"}, {"content", {image, {{"type", "input_image"}, {"image_url", kPng2x1}}}}}}}};
  ParsedRequest r = parse_chat_request(body, {});
  // A message with images reaches the template as its items in order (text, image).
  EXPECT_EQ(r.messages[0]["content"], json::parse(R"([{"type": "text", "text": "a"}, {"type": "image"}])"));
  EXPECT_EQ(r.messages[1]["content"], "ok");
  EXPECT_EQ(r.messages[2]["content"], json::parse(R"([{"type": "image"}, {"type": "image"}])"));
  ASSERT_EQ(r.images.size(), 3u);
  EXPECT_EQ(r.images[0].message, 0u);
  EXPECT_EQ(r.images[0].part, 1u);
  EXPECT_EQ(r.images[2].message, 2u);
  EXPECT_EQ(r.images[2].part, 1u);
  EXPECT_EQ(r.images[1].image.width, 2);
  EXPECT_EQ(r.images[1].image.height, 1);
  EXPECT_EQ(r.images[1].image.rgb, (std::vector<uint8_t>{255, 0, 0, 0, 0, 255}));
}

TEST(Request, BadImagePartsNameThePartAndTheProblem) {
  auto with_url = [](json url) {
    return json{{"messages",
                 {{{"role", "user"},
                   {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "image_url"}, {"image_url", url}}}}}}}};
  };
  struct Case {
    json url;
    std::string param, fragment, code;
  } cases[] = {
      {{{"url", "https://example.com/cat.png"}}, "messages[0].content[1].image_url.url", "not fetched", "remote_image_url"},
      {{{"url", "file:///etc/passwd"}}, "messages[0].content[1].image_url.url", "expected a data: URL", ""},
      {{{"url", 5}}, "messages[0].content[1].image_url.url", "expected a string", ""},
      {{{"detail", "low"}}, "messages[0].content[1].image_url.url", "expected a string", ""},
      {{{"url", "data:image/png;base64,AAAA"}}, "messages[0].content[1].image_url.url", "not a PNG, JPEG", ""},
      {{{"url", "data:image/svg+xml;base64,AAAA"}}, "messages[0].content[1].image_url.url",
       "unsupported media type 'image/svg+xml'", ""},
      {{{"url", std::string(kPng2x1).substr(0, 60)}}, "messages[0].content[1].image_url.url", "corrupt", ""},
  };
  for (const Case& c : cases) {
    ApiError e = error_of([&] { parse_chat_request(with_url(c.url), {}); });
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.fragment), std::string::npos) << e.what();
    if (!c.code.empty()) {
      EXPECT_EQ(e.code, c.code);
    }
  }
  RequestDefaults d;
  d.images.max_images = 2;
  json image = {{"type", "image_url"}, {"image_url", {{"url", kPng2x1}}}};
  json body = {{"messages", {{{"role", "user"}, {"content", {image, image, image}}}}}};
  ApiError e = error_of([&] { parse_chat_request(body, d); });
  EXPECT_EQ(e.param, "messages[0].content[2]");
  EXPECT_NE(std::string(e.what()).find("at most 2"), std::string::npos) << e.what();
  d = RequestDefaults{};
  d.images.max_total_pixels = 3;
  e = error_of([&] { parse_chat_request(body, d); });
  EXPECT_EQ(e.param, "messages[0].content[1].image_url.url");
  EXPECT_NE(std::string(e.what()).find("4 pixels together; the limit is 3"), std::string::npos) << e.what();
}

TEST(Request, InvalidFieldsNameTheField) {
  struct Case {
    json extra;
    std::string param;
  } cases[] = {
      {{{"temperature", "hot"}}, "temperature"},
      {{{"temperature", -1}}, "temperature"},
      {{{"top_p", 0}}, "top_p"},
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"max_tokens", 1e300}}, "max_tokens"},
      {{{"max_tokens", 2.5}}, "max_tokens"},
      {{{"n", 2}}, "n"},
      {{{"stop", 5}}, "stop"},
      {{{"stop", {"a", 1}}}, "stop[1]"},
      {{{"stream", "yes"}}, "stream"},
      {{{"kv_bits", 3}}, "kv_bits"},
      {{{"kv_bits", 8}, {"kv_group_size", 48}}, "kv_group_size"},
      {{{"presence_penalty", 3}}, "presence_penalty"},
      {{{"top_logprobs", 3}}, "top_logprobs"},
      {{{"tools", "x"}}, "tools"},
      {{{"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"messages", json::array()}}, "messages"},
      {{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", "user"}}}}}, "messages[0].content"},
      {{{"num_draft_tokens", 99}}, "num_draft_tokens"},
  };
  for (const auto& c : cases) {
    ApiError e = error_of([&] { parse_chat_request(chat(c.extra), {}); });
    EXPECT_EQ(e.status, 400) << c.extra.dump();
    EXPECT_EQ(e.param, c.param) << c.extra.dump();
    EXPECT_NE(std::string(e.what()).find(c.param), std::string::npos) << e.what();
  }
}

TEST(Request, StructuredOutputFields) {
  auto schema_format = [](json schema) {
    return json{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}};
  };
  // Accepted: each way of asking gives a grammar.
  for (json extra : {json{{"response_format", {{"type", "json_object"}}}}, schema_format({{"type", "integer"}}),
                     json{{"json_schema", {{"enum", {1, 2}}}}}, json{{"grammar", "root ::= [a-z]+"}},
                     json{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}, {"tool_choice", "required"}}}) {
    ParsedRequest r = parse_chat_request(chat(extra), {});
    EXPECT_TRUE(r.structured.grammar) << extra.dump();
  }
  EXPECT_FALSE(parse_chat_request(chat({{"response_format", {{"type", "text"}}}}), {}).structured.grammar);
  EXPECT_FALSE(parse_chat_request(chat({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
                                        {"tool_choice", "auto"}}), {}).structured.grammar);
  // Refused, naming the field and where in it.
  struct Case {
    json extra;
    std::string param;
  } cases[] = {
      {{{"response_format", "json"}}, "response_format"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format.type"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema"},
      {schema_format({{"type", "array"}, {"contains", json::object()}}), "response_format.json_schema.schema/contains"},
      {schema_format({{"properties", {{"a/b", {{"type", "string"}, {"pattern", "(?!x)"}}}}}}),
       "response_format.json_schema.schema/properties/a~1b/pattern"},
      {{{"json_schema", {{"$ref", "#/$defs/none"}}}}, "json_schema/$ref"},
      {{{"grammar", 7}}, "grammar"},
      {{{"grammar", "root ::= x"}}, "grammar"},
      {{{"grammar", "root ::= \"a\""}, {"json_schema", json::object()}}, "grammar"},
  };
  for (const auto& c : cases) {
    ApiError e = error_of([&] { parse_chat_request(chat(c.extra), {}); });
    EXPECT_EQ(e.status, 400) << c.extra.dump();
    EXPECT_EQ(e.param, c.param) << c.extra.dump() << ": " << e.what();
  }
  EXPECT_NE(std::string(error_of([&] { parse_chat_request(chat({{"grammar", "root ::= x"}}), {}); }).what())
                .find("1:10: undefined rule 'x'"),
            std::string::npos);
}

TEST(Request, KvBitsAndSpeculative) {
  RequestDefaults d;
  ParsedRequest r = parse_chat_request(chat({{"kv_bits", 4}, {"kv_group_size", 32}, {"speculative", false}}), d);
  ASSERT_TRUE(r.kv.has_value());
  EXPECT_EQ(r.kv->type, KvType::kQ4);
  EXPECT_EQ(r.kv->group_size, 32);
  EXPECT_FALSE(r.speculative);
  ParsedRequest r2 = parse_chat_request(chat({{"num_draft_tokens", 0}}), d);
  EXPECT_FALSE(r2.speculative);
  EXPECT_FALSE(parse_chat_request(chat({}), d).kv.has_value());
}

TEST(Request, CompletionPrompts) {
  ParsedRequest a = parse_completion_request({{"prompt", "hello"}}, {});
  EXPECT_EQ(a.prompt_text, "hello");
  ParsedRequest b = parse_completion_request({{"prompt", {1, 2, 3}}, {"logprobs", 2}}, {});
  EXPECT_TRUE(b.prompt_is_tokens);
  EXPECT_EQ(b.prompt_tokens.size(), 3u);
  EXPECT_TRUE(b.logprobs);
  EXPECT_EQ(b.top_logprobs, 2);
  EXPECT_EQ(error_of([] { parse_completion_request({{"prompt", {"a", "b"}}}, {}); }).param, "prompt");
  EXPECT_EQ(error_of([] { parse_completion_request({{"prompt", {1, -2}}}, {}); }).param, "prompt[1]");
  EXPECT_EQ(error_of([] { parse_completion_request(json::object(), {}); }).param, "prompt");
}

TEST(ErrorObject, ContextExceededCarriesCounts) {
  json j = context_exceeded(5000, 4096).to_json();
  EXPECT_EQ(j["error"]["type"], "exceed_context_size_error");
  EXPECT_EQ(j["error"]["n_prompt_tokens"], 5000);
  EXPECT_EQ(j["error"]["n_ctx"], 4096);
  EXPECT_TRUE(j["error"].contains("param"));
  EXPECT_TRUE(j["error"].contains("code"));
}

// Feeds `text` one byte at a time (the hardest split for tag detection).
static OutputDelta feed_bytes(OutputParser& p, const std::string& text) {
  OutputDelta all;
  for (char c : text) {
    OutputDelta d = p.feed(std::string(1, c));
    all.content += d.content;
    all.reasoning += d.reasoning;
  }
  OutputDelta f = p.finish();
  all.content += f.content;
  all.reasoning += f.reasoning;
  return all;
}

TEST(OutputParser, ThinkBlockSplitAcrossPieces) {
  OutputParser p(false, nullptr);
  OutputDelta d = feed_bytes(p, "<think>\nplan it</think>\n\nThe answer is 4.");
  EXPECT_EQ(d.reasoning, "\nplan it");
  EXPECT_EQ(d.content, "The answer is 4.");
}

TEST(OutputParser, PromptOpenedThink) {
  OutputParser p(true, nullptr);
  OutputDelta d = feed_bytes(p, "reasoning here</think>\n\nDone");
  EXPECT_EQ(d.reasoning, "reasoning here");
  EXPECT_EQ(d.content, "Done");
}

TEST(OutputParser, PlainTextUntouched) {
  OutputParser p(false, nullptr);
  OutputDelta d = feed_bytes(p, "  a <b> <tool_call> c <thin");
  EXPECT_EQ(d.content, "  a <b> <tool_call> c <thin");  // no tools: no tool parsing
  EXPECT_TRUE(d.reasoning.empty());
}

TEST(OutputParser, HermesToolCall) {
  json tools = {{{"type", "function"}, {"function", {{"name", "get_weather"}}}}};
  OutputParser p(false, tools);
  OutputDelta d = feed_bytes(
      p, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(d.content, "Let me check.\n");
  ASSERT_EQ(p.tool_calls().size(), 1u);
  EXPECT_EQ(p.tool_calls()[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.tool_calls()[0].arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(p.tool_calls()[0].id.rfind("call_", 0), 0u);
}

TEST(OutputParser, Qwen3CoderXmlToolCallsTypedBySchema) {
  json tools = {{{"type", "function"},
                 {"function",
                  {{"name", "set"},
                   {"parameters",
                    {{"type", "object"},
                     {"properties", {{"n", {{"type", "integer"}}}, {"zip", {{"type", "string"}}}}}}}}}}};
  OutputParser p(false, tools);
  std::string text =
      "<tool_call>\n<function=set>\n<parameter=n>\n12\n</parameter>\n<parameter=zip>\n01234\n</parameter>\n"
      "</function>\n</tool_call>\n<tool_call>\n<function=set>\n<parameter=n>\n3\n</parameter>\n</function>\n"
      "</tool_call>";
  OutputDelta d = feed_bytes(p, text);
  EXPECT_TRUE(d.content.empty());
  ASSERT_EQ(p.tool_calls().size(), 2u);
  EXPECT_EQ(json::parse(p.tool_calls()[0].arguments), json({{"n", 12}, {"zip", "01234"}}));
  EXPECT_EQ(json::parse(p.tool_calls()[1].arguments), json({{"n", 3}}));
  EXPECT_NE(p.tool_calls()[0].id, p.tool_calls()[1].id);
}

TEST(OutputParser, MalformedToolCallStaysContent) {
  json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
  OutputParser p(false, tools);
  OutputDelta d = feed_bytes(p, "x <tool_call>{not json</tool_call>");
  EXPECT_TRUE(p.tool_calls().empty());
  EXPECT_EQ(d.content, "x <tool_call>{not json</tool_call>");
}

TEST(OutputParser, ReasoningThenToolCall) {
  json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
  OutputParser p(false, tools);
  OutputDelta d = feed_bytes(p, "<think>need f</think>\n\n<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>");
  EXPECT_EQ(d.reasoning, "need f");
  EXPECT_TRUE(d.content.empty());
  ASSERT_EQ(p.tool_calls().size(), 1u);
  EXPECT_EQ(p.tool_calls()[0].arguments, "{}");
}

TEST(StopMatcher, HoldsBackPartialStopAndCutsAtMatch) {
  StopMatcher m({"STOP", "\n\n"});
  bool hit = false;
  std::string out = m.feed("abc ST", hit);
  EXPECT_FALSE(hit);
  EXPECT_EQ(out, "abc ");
  out = m.feed("OPxyz", hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(out, "");
  StopMatcher m2({"STOP"});
  out = m2.feed("ab S", hit);
  out += m2.feed("x", hit);
  out += m2.flush();
  EXPECT_EQ(out, "ab Sx");
}
