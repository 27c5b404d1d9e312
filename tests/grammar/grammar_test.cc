// tests/grammar/grammar_test.cc — the GBNF parser (llama.cpp's documented examples,
// errors with line:column), the matcher (strings in and out of each language), the token
// trie's masks against a token-by-token check, the constraint's end tokens and rollback,
// and the JSON Schema compiler (integer ranges checked exhaustively, patterns, formats,
// errors naming keyword and pointer).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "grammar/gbnf.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/pattern.h"
#include "grammar/token_trie.h"

namespace nextn::grammar {
namespace {

using json = nlohmann::ordered_json;

std::string read_data(const std::string& name) {
  std::ifstream f(std::string(NEXTN_SOURCE_DIR) + "/tests/grammar/data/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::shared_ptr<const Grammar> gbnf(const std::string& text) { return std::make_shared<Grammar>(parse_gbnf(text)); }

bool full_match(Matcher& m, const std::string& text) { return m.accepting(m.advance(m.start(), text)); }
bool full_match(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return full_match(m, text);
}
bool prefix_ok(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.advance(m.start(), text) != Matcher::kDead;
}

TEST(Gbnf, ArithmeticExample) {
  auto g = gbnf(read_data("arithmetic.gbnf"));
  EXPECT_TRUE(full_match(g, "a=b\n"));
  EXPECT_TRUE(full_match(g, "x1 +(y*2) = 42\nz=3\n"));
  EXPECT_FALSE(prefix_ok(g, "x1 + (y"));  // no space after an operator
  EXPECT_FALSE(full_match(g, "a=b"));        // the line must end
  EXPECT_FALSE(full_match(g, "1a=b\n"));     // a number then a letter
  EXPECT_FALSE(prefix_ok(g, "=b\n"));
  EXPECT_TRUE(prefix_ok(g, "(a +b"));
}

TEST(Gbnf, JsonExample) {
  auto g = gbnf(read_data("json.gbnf"));
  EXPECT_TRUE(full_match(g, R"({"a": [1, 2.5, -3e12, "x\n\u00e9", true, null], "b": {}})"));
  EXPECT_TRUE(full_match(g, "{\"caf\xc3\xa9\": \"\xe2\x82\xac\"}"));  // UTF-8 inside strings
  EXPECT_FALSE(full_match(g, R"({"a": })"));
  EXPECT_FALSE(full_match(g, R"({"a": 1,})"));
  EXPECT_FALSE(full_match(g, "[1]"));  // the root is an object
  EXPECT_FALSE(prefix_ok(g, "{\"a\x01"));  // control characters are not string characters
  // Only well-formed UTF-8: no overlong forms, surrogates or stray continuation bytes,
  // and a lead byte lives only if a character the grammar takes can start with it.
  EXPECT_FALSE(prefix_ok(g, "{\"\xc0\xaf"));
  EXPECT_FALSE(prefix_ok(g, "{\"\xe0\x80"));
  EXPECT_FALSE(prefix_ok(g, "{\"\xed\xa0"));
  EXPECT_FALSE(prefix_ok(g, "{\"\xa9"));
  EXPECT_TRUE(prefix_ok(g, "{\"\xe0\xa0"));
  EXPECT_FALSE(prefix_ok(g, "\xe0"));  // the root starts with '{'
  EXPECT_FALSE(prefix_ok(g, "\xf0"));
}

TEST(Gbnf, ListAndChessExamples) {
  auto list = gbnf(read_data("list.gbnf"));
  EXPECT_TRUE(full_match(list, "- one\n- two \xe2\x9c\x93\n"));
  EXPECT_FALSE(full_match(list, "- \n"));
  EXPECT_FALSE(prefix_ok(list, "- a\xe2\x80\xa8"));  // U+2028 is excluded
  EXPECT_TRUE(prefix_ok(list, "- a\xe2\x80"));       // ... but U+2020..U+2027 are not: the prefix lives
  auto chess = gbnf(read_data("chess.gbnf"));
  EXPECT_TRUE(full_match(chess, "1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6+\n"));
  EXPECT_FALSE(full_match(chess, "1. e4 e5\n"));  // at least one more numbered move
  EXPECT_FALSE(full_match(chess, "1. e9 e5\n2. a3 a6\n"));
}

TEST(Gbnf, Repetitions) {
  auto g = gbnf("root ::= \"a\"{2,3} [0-9]{2} (\"x\" | \"y\")* \"z\"?\n");
  EXPECT_TRUE(full_match(g, "aa12"));
  EXPECT_TRUE(full_match(g, "aaa12xyxz"));
  EXPECT_FALSE(full_match(g, "a12"));
  EXPECT_FALSE(full_match(g, "aaaa12"));
  EXPECT_FALSE(full_match(g, "aa1"));
  auto exact = gbnf("root ::= (\"ab\"){3}\n");
  EXPECT_TRUE(full_match(exact, "ababab"));
  EXPECT_FALSE(full_match(exact, "abab"));
}

TEST(Gbnf, LongRepetitionsRunInConstantStackDepth) {
  auto g = gbnf("root ::= \"[\" [a-z]* \"]\"\n");
  Matcher m(g);
  Matcher::State s = m.advance(m.start(), "[");
  Matcher::State inside = m.advance(s, "abc");
  // Every further letter returns to the same state: the repetition is a loop, not a stack.
  EXPECT_EQ(m.advance(inside, "x"), inside);
  EXPECT_EQ(m.advance(inside, std::string(5000, 'q')), inside);
  EXPECT_TRUE(m.accepting(m.advance(inside, "]")));
}

void expect_error(const std::string& text, int line, int column, const std::string& fragment) {
  try {
    parse_gbnf(text);
    ADD_FAILURE() << "no error for: " << text;
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.line, line) << e.what();
    EXPECT_EQ(e.column, column) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
  expect_error("root ::= item\nitem ::= \"a\" other\n", 2, 14, "undefined rule 'other'");
  expect_error("root ::= \"abc\n", 1, 14, "newline inside a string literal");
  expect_error("root ::= [a-z\n", 1, 10, "unterminated character class");
  expect_error("root = \"a\"\n", 1, 6, "expected '::='");
  expect_error("root ::= \"a\" (\"b\"\n", 1, 14, "expected ')'");
  expect_error("root ::= * \"a\"\n", 1, 10, "nothing to repeat");
  expect_error("start ::= \"a\"\n", 2, 1, "no rule named 'root'");
  expect_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n", 2, 1, "left-recursive");
  expect_error("root ::= (\"a\"?)*\n", 1, 1, "rule 'root' is left-recursive");
  expect_error("root ::= \"\\q\"\n", 1, 11, "unknown escape");
  // Hostile depth: refused, not a stack overflow.
  expect_error("root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')') + "\n", 1, 138, "nested more than");
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 3000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  chain += "r3000 ::= \"x\"\n";
  EXPECT_THROW(parse_gbnf(chain), GrammarError);
  EXPECT_THROW(pattern_to_gbnf(std::string(1000, '(') + "a" + std::string(1000, ')')), PatternError);
}

// The limits hostile grammars meet (each was a crash, a hang or a quiet wrong answer):
// every one is a GrammarLimitError naming the flag that raises it, or a GrammarError.
void expect_limit(const std::function<void()>& compile, const std::string& flag) {
  try {
    compile();
    ADD_FAILURE() << "no limit error (expected " << flag << ")";
  } catch (const GrammarLimitError& e) {
    EXPECT_EQ(e.flag, flag) << e.what();
  }
}

TEST(GrammarLimits, NestedOptionalRepetitionsAreRefusedNotRecursed) {
  // 10^5 optional items in a row: every stack of the start state is one of them.
  for (const char* text : {"root ::= ((\"a\"?){100}){1000}\n", "root ::= (\"a\"?){10000}\n"})
    expect_limit([&] { Matcher m(gbnf(text)); }, "--grammar-max-stacks");
  expect_limit([&] { Matcher m(gbnf("root ::= " + pattern_to_gbnf("((a?){100}){1000}") + "\n")); },
               "--grammar-max-stacks");
  // Raised far enough, the same grammar runs: the expansion is a work list, not recursion
  // (10^5 frames deep would overflow the call stack).
  GrammarLimits wide;
  wide.max_stacks = 1 << 18;
  Matcher m(gbnf("root ::= ((\"a\"?){100}){1000} \"b\"\n"), wide);
  EXPECT_TRUE(m.accepting(m.advance(m.start(), "aaab")));
  EXPECT_FALSE(m.accepting(m.advance(m.start(), "aaa")));
}

TEST(GrammarLimits, ExpandedSizeAndSchemaDepth) {
  expect_limit([] { parse_gbnf("root ::= \"" + std::string(200, 'a') + "\"{10000}\n"); }, "--grammar-max-elements");
  GrammarLimits small;
  small.max_elements = 5000;
  expect_limit([&] { parse_gbnf("root ::= \"ab\"{3000}\n", "root", small); }, "--grammar-max-elements");
  EXPECT_NO_THROW(parse_gbnf("root ::= \"ab\"{3000}\n"));
  // A chain of 10^4 $refs, directly and through properties.
  json direct = {{"$ref", "#/$defs/d0"}, {"$defs", json::object()}};
  json nested = {{"$ref", "#/$defs/d0"}, {"$defs", json::object()}};
  for (int i = 0; i < 10000; ++i) {
    direct["$defs"]["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
    nested["$defs"]["d" + std::to_string(i)] = {
        {"type", "object"}, {"properties", {{"x", {{"$ref", "#/$defs/d" + std::to_string(i + 1)}}}}}};
  }
  direct["$defs"]["d10000"] = {{"type", "string"}};
  nested["$defs"]["d10000"] = {{"type", "string"}};
  expect_limit([&] { json_schema_to_gbnf(direct); }, "--schema-max-depth");
  expect_limit([&] { json_schema_to_gbnf(nested); }, "--schema-max-depth");
  // Within the limit the same chain compiles (the flag allows up to 1000).
  json shorter = {{"$ref", "#/$defs/d9500"}, {"$defs", direct["$defs"]}};
  GrammarLimits deep;
  deep.schema_max_depth = 1000;
  EXPECT_NO_THROW(json_schema_to_gbnf(shorter, Whitespace::kFlexible, deep));
  // An empty $ref is the schema's mistake (a SchemaError naming it), not an internal error.
  EXPECT_THROW(json_schema_to_gbnf(json{{"$ref", ""}}), SchemaError);
}

TEST(GrammarLimits, GrammarsThatMatchNoStringAreRefused) {
  expect_error("root ::= \"\\uD800\"\n", 1, 11, "surrogate");
  expect_error("root ::= \"\\UFFFFFFFF\"\n", 1, 11, "past U+10FFFF");
  expect_error("root ::= [\\uD800-\\uDFFF]\n", 1, 1, "matches no string");
  expect_error("root ::= [^\\x00-\\U0010FFFF]\n", 1, 1, "matches no string");
  expect_error("root ::= x | \"a\" x\nx ::= [\\uDC00-\\uDFFF] x?\n", 1, 1, "matches no string");
  // Unmatchable alternatives beside a matchable one are fine, as are ranges that only
  // touch the surrogates.
  EXPECT_TRUE(full_match(gbnf("root ::= [\\uD800-\\uDFFF] | \"a\"\n"), "a"));
  EXPECT_TRUE(full_match(gbnf("root ::= [\\u0000-\\uFFFF]+\n"), "\xe2\x82\xac"));
}

TEST(GrammarLimits, AmbiguityPastTheLimitWhileGeneratingFailsTheConstraint) {
  // Every "*" may end as "a" or as "b": after n stars, 2^n parses are alive.
  std::vector<std::string> vocab = {"*", "a", "b", ""};
  GrammarLimits limits;
  limits.max_stacks = 64;
  auto compiled = std::make_shared<CompiledGrammar>(gbnf("root ::= s\ns ::= \"*\" s \"a\" | \"*\" s \"b\" | \"*\"\n"),
                                                    std::make_shared<TokenTrie>(vocab), limits);
  GrammarConstraint c(compiled, {3});
  std::vector<float> logits(4);
  int n = 0;
  for (; n < 20 && c.failure().empty(); ++n) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    if (!c.mask(logits.data(), 4)) break;
    EXPECT_EQ(logits[0], 0.0f);
    c.accept(0);
  }
  EXPECT_GE(n, 3);  // a few stars are fine (their masks look one token ahead)
  EXPECT_LT(n, 20);
  EXPECT_NE(c.failure().find("--grammar-max-stacks"), std::string::npos) << c.failure();
  // Rolled back to where the output was still unambiguous enough, it goes on.
  c.rollback(c.depth() - 2);
  EXPECT_TRUE(c.failure().empty());
  std::fill(logits.begin(), logits.end(), 0.0f);
  EXPECT_TRUE(c.mask(logits.data(), 4));
}

// Every token allowed by the trie walk is exactly one whose bytes the matcher reads
// from the state, token by token.
void check_masks(const std::shared_ptr<const Grammar>& g, const std::vector<std::string>& vocab, uint32_t seed) {
  auto trie = std::make_shared<TokenTrie>(vocab);
  Matcher m(g);
  std::mt19937 rng(seed);
  Matcher::State s = m.start();
  std::vector<uint64_t> bits;
  for (int step = 0; step < 40 && s != Matcher::kDead; ++step) {
    trie->allowed(m, s, bits);
    std::vector<int32_t> allowed;
    for (int t = 0; t < int(vocab.size()); ++t) {
      bool by_trie = (bits[size_t(t) >> 6] >> (t & 63)) & 1;
      bool by_token = !vocab[size_t(t)].empty() && m.advance(s, vocab[size_t(t)]) != Matcher::kDead;
      ASSERT_EQ(by_trie, by_token) << "token " << t << " '" << vocab[size_t(t)] << "' at step " << step;
      if (by_token) allowed.push_back(t);
    }
    if (allowed.empty()) break;
    s = m.advance(s, vocab[size_t(allowed[rng() % allowed.size()])]);
  }
}

std::vector<std::string> synthetic_vocab() {
  // Single bytes (all 256: byte-level BPE has them), pieces of JSON, words, and tokens
  // that end or start inside a UTF-8 character.
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  for (const char* t : {"{\"", "\":", "\"", "\",", " \"", "true", "false", "null", "[", "],", "}", "}}", "{\"a",
                        "12", "3.", ".5", "e1", "-", "\\n", "\\u00", "name", " name", "\":\"", "\n  ", "  ", "\xc3",
                        "\xa9", "\xc3\xa9", "caf\xc3", "\xe2\x82", "\xac\"", "\xe2\x82\xac", "\xf0\x9f\x98", "\x80"})
    v.push_back(t);
  v.push_back("");  // an id with no text (special tokens): never allowed
  return v;
}

TEST(TokenTrie, MasksEqualTokenByTokenCheck) {
  auto vocab = synthetic_vocab();
  check_masks(gbnf(read_data("json.gbnf")), vocab, 1);
  check_masks(gbnf(read_data("json.gbnf")), vocab, 2);
  check_masks(gbnf(read_data("list.gbnf")), vocab, 3);
  check_masks(std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(json::parse(
                  R"({"type":"object","properties":{"name":{"type":"string","maxLength":3},"n":{"type":"integer","minimum":-5,"maximum":120}},"required":["name"]})")))),
              vocab, 4);
}

TEST(GrammarConstraint, EndTokensOnlyWhereTheGrammarAccepts) {
  std::vector<std::string> vocab = {"a", "b", "ab", "", "c"};
  const int32_t eos = 3;
  auto g = gbnf("root ::= \"a\" \"b\"? \"c\"?\n");
  GrammarConstraint c(g, std::make_shared<TokenTrie>(vocab), {eos});
  EXPECT_FALSE(c.allows(eos));
  EXPECT_TRUE(c.allows(0));
  EXPECT_TRUE(c.allows(2));
  EXPECT_FALSE(c.allows(1));
  std::vector<float> logits(5, 1.0f);
  EXPECT_TRUE(c.mask(logits.data(), 5));
  EXPECT_EQ(logits[0], 1.0f);
  EXPECT_EQ(logits[2], 1.0f);
  EXPECT_TRUE(std::isinf(logits[1]) && std::isinf(logits[3]) && std::isinf(logits[4]));
  c.accept(0);  // "a": complete, but "b" or "c" may follow
  EXPECT_TRUE(c.allows(eos));
  EXPECT_FALSE(c.complete(1));
  c.accept(1);
  c.accept(4);  // "abc": nothing else may follow
  EXPECT_TRUE(c.complete(3));
  EXPECT_TRUE(c.allows(eos));
  EXPECT_FALSE(c.allows(4));
  c.rollback(2);  // back to "a"
  EXPECT_EQ(c.depth(), 1);
  EXPECT_TRUE(c.allows(1));
  EXPECT_TRUE(c.allows(4));
  c.accept(0);  // forbidden: nothing is allowed any more
  std::fill(logits.begin(), logits.end(), 1.0f);
  EXPECT_FALSE(c.mask(logits.data(), 5));
  EXPECT_TRUE(c.complete(2));
}

// Integer bounds: every integer in a window is accepted exactly when it is in range.
TEST(JsonSchema, IntegerRangesExactly) {
  struct Case {
    std::optional<int64_t> lo, hi;
  };
  for (Case c : {Case{0, 150}, Case{-37, 1234}, Case{7, 7}, Case{-999, -100}, Case{5, std::nullopt},
                 Case{std::nullopt, -3}, Case{std::nullopt, 42}, Case{100, 10099}, Case{-1, 0}}) {
    json schema = {{"type", "integer"}};
    if (c.lo) schema["minimum"] = *c.lo;
    if (c.hi) schema["maximum"] = *c.hi;
    auto g = std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(schema)));
    Matcher m(g);
    for (int64_t x = -1500; x <= 12000; ++x) {
      bool in = (!c.lo || x >= *c.lo) && (!c.hi || x <= *c.hi);
      ASSERT_EQ(full_match(m, std::to_string(x)), in) << schema.dump() << " x=" << x;
    }
    EXPECT_FALSE(full_match(m, "-0"));
    EXPECT_FALSE(full_match(m, "007"));
  }
}

TEST(JsonSchema, ExclusiveBoundsAndNumbers) {
  auto g = std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(
      json{{"type", "number"}, {"exclusiveMinimum", 0}, {"maximum", 10}})));
  EXPECT_TRUE(full_match(g, "10"));
  EXPECT_TRUE(full_match(g, "9.75"));
  EXPECT_TRUE(full_match(g, "1"));
  EXPECT_FALSE(full_match(g, "0"));
  EXPECT_FALSE(full_match(g, "10.5"));
  EXPECT_FALSE(full_match(g, "-1"));
}

TEST(JsonSchema, ObjectsWithOptionalMembers) {
  json schema = json::parse(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},
      "c":{"type":"null"}},"required":["b"],"additionalProperties":false})");
  auto g = std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(schema, Whitespace::kCompact)));
  EXPECT_TRUE(full_match(g, R"({"b":true})"));
  EXPECT_TRUE(full_match(g, R"({"a":1,"b":false})"));
  EXPECT_TRUE(full_match(g, R"({"a":1,"b":false,"c":null})"));
  EXPECT_TRUE(full_match(g, R"({"b":false,"c":null})"));
  EXPECT_FALSE(full_match(g, R"({"a":1})"));
  EXPECT_FALSE(full_match(g, R"({,"b":true})"));
  EXPECT_FALSE(full_match(g, R"({"b":true,})"));
  EXPECT_FALSE(full_match(g, R"({"b":true,"d":1})"));
  json none = json::parse(R"({"type":"object","properties":{"x":{"const":1},"y":{"const":2}}})");
  auto g2 = std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(none, Whitespace::kCompact)));
  for (const char* ok : {"{}", R"({"x":1})", R"({"y":2})", R"({"x":1,"y":2})"}) EXPECT_TRUE(full_match(g2, ok)) << ok;
  EXPECT_FALSE(full_match(g2, R"({"y":2,"x":1})"));
}

TEST(JsonSchema, RecursiveRefsArraysAndUnions) {
  json schema = json::parse(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},
      "$ref":"#/$defs/node"})");
  auto g = std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(schema, Whitespace::kCompact)));
  EXPECT_TRUE(full_match(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"));
  EXPECT_FALSE(full_match(g, R"({"v":1,"kids":[{"v":2},{"v":3},{"v":4}]})"));
  json u = json::parse(R"({"anyOf":[{"type":"string","enum":["a","b"]},{"type":"null"}]})");
  auto gu = std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(u)));
  EXPECT_TRUE(full_match(gu, "\"a\""));
  EXPECT_TRUE(full_match(gu, "null"));
  EXPECT_FALSE(full_match(gu, "\"c\""));
  json arr = json::parse(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3})");
  auto ga = std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(arr, Whitespace::kCompact)));
  EXPECT_FALSE(full_match(ga, "[true]"));
  EXPECT_TRUE(full_match(ga, "[true,false]"));
  EXPECT_TRUE(full_match(ga, "[true,false,true]"));
  EXPECT_FALSE(full_match(ga, "[true,false,true,true]"));
}

TEST(JsonSchema, StringsPatternsFormatsLengths) {
  auto compile = [](const char* s) {
    return std::make_shared<Grammar>(parse_gbnf(json_schema_to_gbnf(json::parse(s))));
  };
  auto p = compile(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}(x|yz)?$"})");
  EXPECT_TRUE(full_match(p, "\"AB-123\""));
  EXPECT_TRUE(full_match(p, "\"QQ-000yz\""));
  EXPECT_FALSE(full_match(p, "\"A-123\""));
  auto q = compile(R"({"type":"string","pattern":"a\"b\\\\c.+"})");  // a"b\c then anything
  EXPECT_TRUE(full_match(q, R"("a\"b\\cz")"));
  EXPECT_FALSE(full_match(q, R"("a"b\\cz")"));
  // An empty group under a quantifier is the empty string (found by grammar_fuzz).
  auto empty = compile(R"({"type":"string","pattern":"^a()?(?:)*b$"})");
  EXPECT_TRUE(full_match(empty, "\"ab\""));
  EXPECT_FALSE(full_match(empty, "\"a\""));
  auto len = compile(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(full_match(len, "\"ab\""));
  EXPECT_TRUE(full_match(len, "\"a\\nb\""));  // an escape is one character
  EXPECT_FALSE(full_match(len, "\"a\""));
  EXPECT_FALSE(full_match(len, "\"abcd\""));
  auto date = compile(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(full_match(date, "\"2024-02-28\""));
  EXPECT_FALSE(full_match(date, "\"2024-02-30\""));
  EXPECT_FALSE(full_match(date, "\"2024-13-01\""));
  auto uuid = compile(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(full_match(uuid, "\"123e4567-e89b-12d3-a456-426614174000\""));
  EXPECT_FALSE(full_match(uuid, "\"123e4567e89b12d3a456426614174000\""));
}

void expect_schema_error(const char* schema, const std::string& pointer, const std::string& fragment) {
  try {
    json_schema_to_gbnf(json::parse(schema));
    ADD_FAILURE() << "no error for " << schema;
  } catch (const SchemaError& e) {
    EXPECT_EQ(e.pointer, pointer) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(JsonSchema, UnsupportedKeywordsNameKeywordAndPointer) {
  expect_schema_error(R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})",
                      "/properties/a/uniqueItems", "'uniqueItems'");
  expect_schema_error(R"j({"type":"string","pattern":"(?=x)"})j", "/pattern", "lookaround");
  expect_schema_error(R"({"type":"string","format":"hostname"})", "/format", "'hostname'");
  expect_schema_error(R"({"$ref":"#/$defs/missing"})", "/$ref", "points at nothing");
  expect_schema_error(R"({"type":"thing"})", "/type", "unknown type 'thing'");
  expect_schema_error(R"({"type":"integer","minimum":0.2,"maximum":0.8})", "", "no integer");
  expect_schema_error(R"({"anyOf":[{"type":"null"}],"type":"string"})", "/type", "together with 'anyOf'");
  expect_schema_error(R"({"items":{"not":{}}})", "/items/not", "'not'");
}

TEST(Pattern, Errors) {
  EXPECT_THROW(pattern_to_gbnf("a\\1"), PatternError);
  EXPECT_THROW(pattern_to_gbnf("(ab"), PatternError);
  EXPECT_THROW(pattern_to_gbnf("a^b"), PatternError);
  EXPECT_THROW(pattern_to_gbnf("\\bword"), PatternError);
  EXPECT_THROW(pattern_to_gbnf("\\w{3,2}"), PatternError);  // found by grammar_fuzz
  EXPECT_THROW(pattern_to_gbnf("\\x{1,6}"), PatternError);  // found by grammar_fuzz (was std::invalid_argument)
  EXPECT_THROW(pattern_to_gbnf("\\u12"), PatternError);
  EXPECT_THROW(pattern_to_gbnf("a{,5}"), PatternError);
  EXPECT_THROW(pattern_to_gbnf("a{99999}"), PatternError);
}

}  // namespace
}  // namespace nextn::grammar
