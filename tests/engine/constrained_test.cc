// tests/engine/constrained_test.cc — structured output under speculation: with a grammar
// constraint, speculative greedy decoding (MTP, draft model, n-gram; N = 1..4) gives
// exactly the tokens of constrained greedy decoding without drafting, the text is in
// the grammar's language, and a grammar that completes ends the generation with `stop`.
// (The T > 0 distribution under a constraint: distribution_test.cc.)
#include <nlohmann/json.hpp>

#include "constraint_util.h"
#include "engine_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace nextn {
namespace {

using namespace nextn::testing;

const std::vector<int32_t> kPrompt = {3, 17, 42, 99, 5, 17, 42, 99, 5, 17, 42, 7, 250, 12};
const std::vector<int32_t> kPrompt2 = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4};

// Lists that go on and on: the random model never runs out of allowed tokens.
const char* kListGrammar =
    "root ::= \"[\" item (\",\" \" \"? item)*\n"
    "item ::= [a-z]{1,5} | [0-9]{1,3} | \"\\\"\" [a-z ]{0,8} \"\\\"\"\n";

std::string text_of(const std::string& model, const std::vector<int32_t>& tokens) {
  return Tokenizer::load(model)->decode(tokens, false);
}

struct ConstrainedRun {
  std::vector<int32_t> tokens;
  FinishReason reason;
  uint64_t drafted = 0;
};

ConstrainedRun constrained(EngineOptions o, const std::vector<int32_t>& prompt, const std::string& gbnf, int n_tokens,
                SamplingParams sp = {}) {
  Engine engine(o);
  ConstraintFactory f = constraint_factory(o.model_dir, engine.model().config().vocab_size, gbnf);
  auto req = greedy_request(prompt, n_tokens);
  req.sampling = sp;
  req.constraint = f.make();
  auto r = run_one(engine, std::move(req));
  return {r.tokens, r.reason, r.timings.speculative.draft_tokens};
}

void check_constrained_equal(const std::string& model, const std::string& mode, const std::string& extra,
                             const std::string& gbnf, int n_tokens, bool expect_complete, int draft_vocab = -1) {
  for (const auto& prompt : {kPrompt, kPrompt2}) {
    ConstrainedRun plain = constrained(base_options(model), prompt, gbnf, n_tokens);
    // The constrained text is in the language (a prefix of a sentence, or a whole one).
    grammar::Matcher m(std::make_shared<grammar::Grammar>(grammar::parse_gbnf(gbnf)));
    std::string text = text_of(model, plain.tokens);
    grammar::Matcher::State s = m.advance(m.start(), text);
    ASSERT_NE(s, grammar::Matcher::kDead) << "outside the grammar: " << text;
    if (expect_complete) {
      EXPECT_EQ(plain.reason, FinishReason::kStop) << text;
      EXPECT_TRUE(m.accepting(s)) << text;
    }
    for (int n = 1; n <= 4; ++n) {
      EngineOptions o = spec_options(model, mode, n);
      if (mode == "draft") o.speculative.draft_model_dir = extra;
      o.speculative.draft_vocab = draft_vocab;
      ConstrainedRun spec = constrained(o, prompt, gbnf, n_tokens);
      EXPECT_EQ(spec.tokens, plain.tokens) << mode << " N=" << n << "\nplain: " << text
                                           << "\nspec:  " << text_of(model, spec.tokens);
      EXPECT_EQ(spec.reason, plain.reason) << mode << " N=" << n;
      EXPECT_GT(spec.drafted, 0) << mode << " N=" << n;
    }
  }
}

TEST(ConstrainedGreedy, MtpEqualsPlain) { check_constrained_equal(deepseek_model(), "mtp", "", kListGrammar, 40, false); }

TEST(ConstrainedGreedy, MtpReducedDraftVocabularyEqualsPlain) {
  // The head scores only ids 0..63 (printable ASCII up to '`'): most allowed tokens lie
  // outside, where the draft row is -inf, so some drafts have nothing to choose from.
  check_constrained_equal(deepseek_model(), "mtp", "", kListGrammar, 40, false, 64);
}

TEST(ConstrainedGreedy, DraftModelEqualsPlain) {
  // The target as its own draft model: drafts are accepted, so the constraint's state
  // must follow long accepted runs and the bonus token.
  check_constrained_equal(qwen3_model(), "draft", qwen3_model(), kListGrammar, 40, false);
}

TEST(ConstrainedGreedy, NgramEqualsPlain) {
  // n-gram drafts are not chosen under the grammar: the forbidden ones must be dropped.
  check_constrained_equal(mimo_model(), "ngram", "", kListGrammar, 80, false);
}

TEST(ConstrainedGreedy, SchemaCompletesWithStop) {
  std::string gbnf = grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"id":{"type":"integer","minimum":0,"maximum":999},
          "tag":{"enum":["red","green","blue"]},"ok":{"type":"boolean"}},"required":["id","tag","ok"]})"),
      grammar::Whitespace::kCompact);
  check_constrained_equal(deepseek_model(), "mtp", "", gbnf, 60, true);
  check_constrained_equal(qwen3_model(), "draft", qwen3_model(), gbnf, 60, true);
  ConstrainedRun r = constrained(base_options(deepseek_model()), kPrompt, gbnf, 60);
  auto value = nlohmann::json::parse(text_of(deepseek_model(), r.tokens));
  EXPECT_TRUE(value["id"].is_number_integer());
  EXPECT_TRUE(value["ok"].is_boolean());
}

TEST(ConstrainedGreedy, EndTokenOnlyWhereTheGrammarAccepts) {
  // With an end token the model may stop only after a complete list.
  EngineOptions o = base_options(mimo_model());
  Engine engine(o);
  int vocab = engine.model().config().vocab_size;
  const char* g = "root ::= \"[\" [a-z]{1,3} (\",\" [a-z]{1,3})* \"]\"\n";
  for (int32_t end : {int32_t(vocab - 1), int32_t(vocab - 2)}) {
    ConstraintFactory f = constraint_factory(o.model_dir, vocab, g, {end});
    auto req = greedy_request(kPrompt, 120);
    req.constraint = f.make();
    req.stop_tokens = {end};
    auto r = run_one(engine, std::move(req));
    std::string text = text_of(mimo_model(), r.tokens);
    grammar::Matcher m(f.grammar);
    grammar::Matcher::State s = m.advance(m.start(), text);
    ASSERT_NE(s, grammar::Matcher::kDead) << text;
    if (r.reason == FinishReason::kStop) {
      EXPECT_TRUE(m.accepting(s)) << text;
    }
  }
}

}  // namespace
}  // namespace nextn
