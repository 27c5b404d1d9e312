// tests/chat/chat_test.cc — unit tests of the Jinja interpreter: whitespace control,
// Python value semantics, errors with line and column, raise_exception, strftime_now,
// namespace scoping and ChatTemplate's variables. Expected strings are what Python's
// jinja2 renders for the same templates (see tests/chat/test_templates.py for the
// full differential test).
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "util/error.h"

namespace nextn {
namespace {

std::string render(const std::string& src, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  jinja::Template t(src);
  std::map<std::string, jinja::Value> v;
  for (auto& [k, x] : vars.items()) v[k] = jinja::Value::from_json(x);
  return t.render(v);
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");       // trim_blocks
  EXPECT_EQ(render("a\n    {% if true %}b{% endif %}"), "a\nb");                    // lstrip_blocks
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(render("x {# comment #}\ny"), "x y");
  EXPECT_EQ(render("{% raw %}{{ not }}{% endraw %}"), "{{ not }}");
  EXPECT_EQ(render("line\n"), "line");  // keep_trailing_newline=False
}

TEST(Jinja, PythonValueSemantics) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.0] }}"), "[1, 'a', None, True, 1.0]");
  EXPECT_EQ(render("{{ {'k': [1, 2]} }} {{ (1,) }}"), "{'k': [1, 2]} (1,)");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 % 3 }} {{ 1 / 4 }} {{ 1e20 }}"), "3 2 0.25 1e+20");
  EXPECT_EQ(render("{{ 'abcdef'[::-2] }} {{ [1,2,3,4][1:-1] }}"), "fdb [2, 3]");
  EXPECT_EQ(render("{{ x|tojson }}", {{"x", {{"b", 1}, {"a", "é\"<"}}}}), "{\"b\": 1, \"a\": \"é\\\"<\"}");
  EXPECT_EQ(render("{{ x|tojson(indent=2) }}", {{"x", {1, 2}}}), "[\n  1,\n  2\n]");
  EXPECT_EQ(render("{{ '  a b  '.split() }} {{ 'a,b,c'.split(',', 1) }}"), "['a', 'b'] ['a', 'b,c']");
  EXPECT_EQ(render("{{ undefined_thing }}|{{ undefined_thing is defined }}"), "|False");
}

TEST(Jinja, NamespaceAndScoping) {
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% set x = 1 %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
                   "{% set x = 5 %}{% endfor %}{{ ns.n }} {{ x }}"),
            "3 1");
  EXPECT_EQ(render("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"), "[1B][23]");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
                   "{{ i }}{% endfor %}"),
            "02");
}

TEST(Jinja, ErrorsCarryLineAndColumn) {
  try {
    render("line one\n{{ 1 + }}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat template: line 2, column"), std::string::npos) << e.what();
  }
  try {
    render("a\nb {{ raise_exception('roles must alternate') }}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "chat template: line 2, column 6: roles must alternate");
  }
  EXPECT_THROW(render("{% if x %}unterminated"), Error);
  EXPECT_THROW(render("{{ x.y }}"), Error);  // attribute of undefined
  // split / rsplit separators as Python checks them (a fuzzer found rsplit with a count
  // reading a number as a string; an empty one would have looped up to the count).
  const std::pair<const char*, const char*> separator_errors[] = {
      {"{{ 'a b'.rsplit(1, 1) }}", "must be str or None, not int"},
      {"{{ 'a b'.split(none, 1) ~ 'a b'.split(1) }}", "must be str or None, not int"},
      {"{{ 'a b'.rsplit('', 99999999999) }}", "empty separator"},
      {"{{ 'a b'.split('') }}", "empty separator"}};
  for (const auto& [t, message] : separator_errors) {
    try {
      render(t);
      FAIL() << t;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(Jinja, StrftimeNow) {
  char buf[64];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y", &tm);
  EXPECT_EQ(render("{{ strftime_now('%Y') }}"), buf);
}

TEST(ChatTemplate, FromModelDirPassesTokensAndKwargs) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(NEXTN_BUILD_DIR) / "test-tmp" / "chat_test";
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "pad_token": null,
             "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{{ eos_token }}{% endfor %}{% if tools %}T{{ tools|length }}{% endif %}{% if add_generation_prompt %}>{% endif %}{{ pad_token is defined }}{{ enable_thinking }}"})";
  auto t = ChatTemplate::from_model_dir(dir.string());
  nlohmann::ordered_json msgs = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(t.render(msgs, nullptr, true, {{"enable_thinking", false}}), "<s>user:hi</s>>FalseFalse");
  EXPECT_EQ(t.render(msgs, nlohmann::ordered_json::array({1, 2}), false, nlohmann::ordered_json::object()),
            "<s>user:hi</s>T2False");
  EXPECT_THROW(ChatTemplate::from_model_dir((dir / "missing").string()), Error);
}

}  // namespace
}  // namespace nextn
