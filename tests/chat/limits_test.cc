// tests/chat/limits_test.cc — hostile templates end with an error that names the limit
// they hit (recursion, evaluation steps, output size, time, shutdown), at parse time
// when the tree itself is too deep, and never by exhausting the stack or the memory.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "chat/jinja.h"
#include "util/error.h"

namespace nextn {
namespace {

// Renders and returns the error message ("" when the render succeeds).
std::string render_error(const std::string& src, const jinja::RenderLimits& limits = {}) {
  try {
    jinja::Template t(src);
    t.render({}, limits);
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
    return e.what();
  }
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(TemplateLimits, RecursiveMacroHitsDepth) {
  std::string e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(e.find("max_depth"), std::string::npos) << e;
  // Bounded recursion well inside the limit still works.
  jinja::Template t("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(30) }}");
  EXPECT_EQ(t.render({}).substr(0, 6), "302928");
}

TEST(TemplateLimits, NestedHugeLoopsHitSteps) {
  std::string e = render_error("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}");
  EXPECT_NE(e.find("max_steps"), std::string::npos) << e;
}

TEST(TemplateLimits, HugeRangeHitsSteps) {
  std::string e = render_error("{{ range(1000000000)|length }}");
  EXPECT_NE(e.find("max_steps"), std::string::npos) << e;
}

TEST(TemplateLimits, StringRepetitionIsRefusedBeforeAllocating) {
  std::string e = render_error("{{ 'x' * 1000000000 }}");
  EXPECT_NE(e.find("max_output_bytes"), std::string::npos) << e;
  EXPECT_NE(render_error("{{ 'abc' * 9223372036854775807 }}").find("max_output_bytes"), std::string::npos);
}

TEST(TemplateLimits, DoublingStringsAndListsAreBounded) {
  std::string s = render_error(
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}");
  EXPECT_NE(s.find("max_output_bytes"), std::string::npos) << s;
  std::string l = render_error(
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}");
  EXPECT_NE(l.find("max_steps"), std::string::npos) << l;
  std::string m = render_error("{{ ([1, 2] * 1000000000)|length }}");
  EXPECT_NE(m.find("max_steps"), std::string::npos) << m;
}

TEST(TemplateLimits, OutputSizeIsBounded) {
  jinja::RenderLimits small;
  small.max_output_bytes = 1000;
  std::string e = render_error("{% for i in range(2000) %}x{% endfor %}", small);
  EXPECT_NE(e.find("max_output_bytes"), std::string::npos) << e;
  EXPECT_EQ(render_error("{% for i in range(999) %}x{% endfor %}", small), "");
}

TEST(TemplateLimits, WallTimeIsBounded) {
  jinja::RenderLimits slow;
  slow.max_steps = INT64_MAX;
  slow.max_seconds = 0.05;
  std::string e = render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", slow);
  EXPECT_NE(e.find("max_seconds"), std::string::npos) << e;
}

TEST(TemplateLimits, CancelFlagStopsARender) {
  std::atomic<bool> cancel{true};
  jinja::RenderLimits limits;
  limits.max_steps = INT64_MAX;
  limits.cancel = &cancel;
  std::string e = render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", limits);
  EXPECT_NE(e.find("cancelled"), std::string::npos) << e;
}

TEST(TemplateLimits, DeepSyntaxIsRefusedAtParseTime) {
  // Each of these would recurse once per level while parsing, rendering and freeing.
  for (const std::string& src : {"{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}",
                                 "{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}",
                                 "{{ 1" + repeat(" + 1", 100000) + " }}",
                                 "{{ x" + repeat(".a", 100000) + " }}",
                                 "{{ x" + repeat("|string", 100000) + " }}",
                                 "{{ " + repeat("not ", 100000) + "x }}",
                                 "{{ " + repeat("-", 100000) + "1 }}",
                                 repeat("{% if true %}", 100000) + repeat("{% endif %}", 100000)}) {
    std::string e = render_error(src);
    EXPECT_NE(e.find("nests deeper than"), std::string::npos) << e.substr(0, 200);
  }
  // Ordinary depth is fine.
  EXPECT_EQ(render_error("{{ " + repeat("(", 50) + "1" + repeat(")", 50) + " }}"), "");
  EXPECT_EQ(render_error("{{ 1" + repeat(" + 1", 60) + " }}"), "");
}

TEST(TemplateLimits, IntegerOverflowIsAnError) {
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(render_error("{{ 3037000500 * 3037000500 }}").find("overflow"), std::string::npos);
  EXPECT_NE(render_error("{{ 2 ** 1000000000000000000 }}").find("overflow"), std::string::npos);
  EXPECT_NE(render_error("{{ 99999999999999999999 }}").find("does not fit"), std::string::npos);
  EXPECT_NE(render_error("{{ '\\xZZ' }}").find("bad escape"), std::string::npos);
  jinja::Template t("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1e999 }}");
  EXPECT_EQ(t.render({}), "4611686018427387904 -9223372036854775808 inf");
}

}  // namespace
}  // namespace nextn
