// tests/engine/distribution_test.cc — lossless speculative sampling, end to end:
// on a tiny checkpoint (small vocabulary), >= 100,000 tokens sampled at T > 0 with
// and without MTP speculation follow the same distribution (two-sample chi-square
// over (position, token), p > 0.01), while a deliberately broken acceptance rule
// (rejections resampled from p instead of norm(max(0, p - q))) fails the same test.
// Under a grammar constraint (structured output) the same holds against constrained
// sampling without drafting: masked q for MTP drafts, forbidden n-gram drafts dropped.
#include <map>
#include <optional>

#include "../speculative/chi_square.h"
#include "../speculative/wrong_rejection_rule.h"
#include "constraint_util.h"
#include "engine_test_util.h"
#include "speculative/speculator.h"

namespace nextn {
namespace {

using namespace nextn::testing;

constexpr int kRequests = 20000;
constexpr int kTokens = 5;  // per request: 100,000 tokens per run

// mixed_depths: request i asks for at most i mod 5 drafts per step (0: none), so every
// batched step verifies sequences of different depths together.
// on_reject: what replaces a rejected draft (null: the engine's own, lossless rule).
std::map<std::pair<int, int32_t>, double> histogram(EngineOptions o, uint64_t seed_base, double* acceptance,
                                                   const char* gbnf = nullptr, bool mixed_depths = false,
                                                   RejectionRule on_reject = nullptr) {
  o.parallel = 8;
  o.queue_size = kRequests;
  std::unique_ptr<Model> model = Model::load(o.model_dir, o.load);
  auto speculator = std::make_unique<Speculator>(*model, o.speculative, o.parallel, on_reject);
  Engine engine(o, std::move(model), std::move(speculator));
  std::optional<ConstraintFactory> constraint;
  if (gbnf) constraint = constraint_factory(o.model_dir, engine.model().config().vocab_size, gbnf);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < kRequests; ++i) {
    GenerationRequest r;
    if (constraint) r.constraint = constraint->make();
    r.prompt = {11, 42, 7, 300, 11, 42, 9, 11, 42, 7, 300, 5};
    r.max_tokens = kTokens;
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.95f;
    r.sampling.min_p = 0.02f;
    r.sampling.seed = seed_base + uint64_t(i);
    r.sampling.has_seed = true;
    if (mixed_depths) r.num_draft_tokens = i % 5;
    reqs.push_back(std::move(r));
  }
  auto results = run_all(engine, std::move(reqs));
  std::map<std::pair<int, int32_t>, double> h;
  long drafted = 0, accepted = 0, tokens = 0;
  for (auto& r : results) {
    EXPECT_EQ(int(r.tokens.size()), kTokens);
    for (size_t p = 0; p < r.tokens.size(); ++p) h[{int(p), r.tokens[p]}] += 1;
    tokens += long(r.tokens.size());
    drafted += r.timings.speculative.draft_tokens;
    accepted += r.timings.speculative.accepted;
  }
  EXPECT_GE(tokens, 100000);
  if (acceptance) *acceptance = drafted ? double(accepted) / double(drafted) : 0.0;
  return h;
}

// The target: tiny Qwen3 with a DeepSeek-layout MTP layer. Checkpoints made with
// the same seed share every tensor of the same name, so the 2-layer draft model is
// the target minus its last layer (q close to p but not equal: a good test of the
// residual distribution) and the assistant is built for the same trunk.
std::string target_model() { return deepseek_model(); }

const std::map<std::pair<int, int32_t>, double>& plain_histogram() {
  static auto h = histogram(base_options(target_model()), 1000000, nullptr);
  return h;
}

// min_acceptance >= 0: the drafts must also be accepted more often than that (so the
// test exercises accepted and rejected drafts alike).
void expect_lossless(EngineOptions o, const char* name, bool mixed_depths = false, double min_acceptance = -1.0) {
  double acc = 0;
  auto spec = histogram(o, 2000000, &acc, nullptr, mixed_depths);
  auto r = homogeneity(plain_histogram(), spec);
  EXPECT_GT(r.p_value, 0.01) << name << ": chi2 " << r.statistic << " dof " << r.dof;
  if (min_acceptance >= 0) {
    EXPECT_GT(acc, min_acceptance) << name;
  }
  std::printf("%s: chi2 %.1f dof %d p %.3f (acceptance %.3f)\n", name, r.statistic, r.dof, r.p_value, acc);
}

// The draft model: the target less its last layer (q close to p, not equal).
EngineOptions draft_model_options(int n) {
  EngineOptions o = spec_options(target_model(), "draft", n);
  o.speculative.draft_model_dir = checkpoint("qwen3_l2", "--arch qwen3 --layers 2 --seed 2");
  return o;
}

TEST(Distribution, MtpIsLossless) { expect_lossless(spec_options(target_model(), "mtp", 3), "mtp"); }

TEST(Distribution, MixedDepthsInEachBatchAreLossless) {
  // The draft model is accepted often enough (~0.3) that every batch mixes accepted,
  // rejected and absent drafts at depths 0..4.
  expect_lossless(draft_model_options(4), "draft, mixed depths", true, 0.1);
}

TEST(Distribution, PlannedDepthsAreLossless) {
  // `auto`: the planner picks each sequence's depth per step from costs and acceptance.
  EngineOptions o = draft_model_options(4);
  o.speculative.adaptive = true;
  expect_lossless(o, "draft auto");
}

TEST(Distribution, MtpOnQwen3_5HybridIsLossless) {
  // The hybrid's own plain run as the reference distribution.
  static auto plain = histogram(base_options(qwen3_5_model()), 1000000, nullptr);
  double acc = 0;
  auto spec = histogram(spec_options(qwen3_5_model(), "mtp", 3), 2000000, &acc);
  auto r = homogeneity(plain, spec);
  EXPECT_GT(r.p_value, 0.01) << "mtp qwen3.5: chi2 " << r.statistic << " dof " << r.dof;
  EXPECT_GT(acc, 0.0);
  std::printf("mtp qwen3.5: chi2 %.1f dof %d p %.3f (acceptance %.3f)\n", r.statistic, r.dof, r.p_value, acc);
}

TEST(Distribution, MtpOnQwen3_5MoeIsLossless) {
  // The MoE model's own plain run as the reference distribution (routed MTP layer).
  static auto plain = histogram(base_options(qwen3_5_moe_model()), 1000000, nullptr);
  double acc = 0;
  auto spec = histogram(spec_options(qwen3_5_moe_model(), "mtp", 3), 2000000, &acc);
  auto r = homogeneity(plain, spec);
  EXPECT_GT(r.p_value, 0.01) << "mtp qwen3.5-moe: chi2 " << r.statistic << " dof " << r.dof;
  EXPECT_GT(acc, 0.0);
  std::printf("mtp qwen3.5-moe: chi2 %.1f dof %d p %.3f (acceptance %.3f)\n", r.statistic, r.dof, r.p_value, acc);
}

TEST(Distribution, AssistantIsLossless) {
  EngineOptions o = spec_options(target_model(), "assistant", 2);
  o.speculative.assistant_dir = assistant_model();
  expect_lossless(o, "assistant");
}

TEST(Distribution, Gemma4AssistantIsLossless) {
  // The Gemma 4 model's own plain run as the reference; drafts sampled from the
  // assistant's centroid-masked distribution.
  static auto plain = histogram(base_options(gemma4_model()), 1000000, nullptr);
  EngineOptions o = spec_options(gemma4_model(), "assistant", 3);
  o.speculative.assistant_dir = gemma4_assistant_model();
  double acc = 0;
  auto spec = histogram(o, 2000000, &acc);
  auto r = homogeneity(plain, spec);
  EXPECT_GT(r.p_value, 0.01) << "gemma4 assistant: chi2 " << r.statistic << " dof " << r.dof;
  EXPECT_GT(acc, 0.0);
  std::printf("gemma4 assistant: chi2 %.1f dof %d p %.3f (acceptance %.3f)\n", r.statistic, r.dof, r.p_value, acc);
}

TEST(Distribution, Eagle3IsLossless) {
  // Drafts sampled from the drafter's distribution over its 300-token vocabulary (q is zero
  // on the other tokens: the residual carries their target probability).
  EngineOptions o = spec_options(target_model(), "eagle3", 3);
  o.speculative.draft_model_dir = deepseek_eagle3_model();
  expect_lossless(o, "eagle3");
}

TEST(Distribution, DraftModelIsLossless) { expect_lossless(draft_model_options(3), "draft"); }

TEST(Distribution, DFlashIsLossless) {
  // A block's drafts are drawn from its slots' distributions all at once (no draft feeds
  // the next); requests of mixed depths share each drafter forward.
  EngineOptions o = spec_options(target_model(), "dflash", 4);
  o.speculative.draft_model_dir =
      checkpoint("qwen3_ds_dflash", "--dflash-of " + target_model() + " --dflash-layers 2 --block-size 5 --seed 9");
  expect_lossless(o, "dflash, mixed depths", true, 0.0);
}

TEST(Distribution, NgramIsLossless) { expect_lossless(spec_options(target_model(), "ngram", 3), "ngram"); }

// Every request has the same prompt, so the server's index of earlier outputs drafts too.
TEST(Distribution, SuffixIsLossless) { expect_lossless(spec_options(target_model(), "suffix", 4), "suffix"); }

// MTP drafts where the suffix lookup does not take over: sampled (q) and deterministic
// drafts in one batch.
TEST(Distribution, MtpChainedWithSuffixIsLossless) {
  expect_lossless(spec_options(target_model(), "mtp+suffix", 4), "mtp+suffix");
}

// Words of lowercase letters and spaces: a few dozen of the tiny vocabulary's tokens
// are allowed at each position, so the masked distributions differ from the plain ones.
const char* kWordsGrammar = "root ::= [a-z ]{1,60}\n";

const std::map<std::pair<int, int32_t>, double>& constrained_plain_histogram() {
  static auto h = histogram(base_options(target_model()), 1000000, nullptr, kWordsGrammar);
  return h;
}

void expect_constrained_lossless(EngineOptions o, const char* name) {
  double acc = 0;
  auto spec = histogram(o, 2000000, &acc, kWordsGrammar);
  auto r = homogeneity(constrained_plain_histogram(), spec);
  EXPECT_GT(r.p_value, 0.01) << name << ": chi2 " << r.statistic << " dof " << r.dof;
  EXPECT_GT(acc, 0.0) << name;
  std::printf("%s: chi2 %.1f dof %d p %.3f (acceptance %.3f)\n", name, r.statistic, r.dof, r.p_value, acc);
}

TEST(Distribution, ConstrainedMtpIsLossless) {
  expect_constrained_lossless(spec_options(target_model(), "mtp", 3), "constrained mtp");
}

TEST(Distribution, ConstrainedMtpReducedDraftVocabularyIsLossless) {
  // Draft ids 0..127 hold the single letters but no space and no merged token: q keeps
  // only the allowed ids the head scores, rows with none of them are dropped drafts.
  EngineOptions o = spec_options(target_model(), "mtp", 3);
  o.speculative.draft_vocab = 128;
  double acc = 0;
  auto spec = histogram(o, 2000000, &acc, kWordsGrammar);
  auto r = homogeneity(constrained_plain_histogram(), spec);
  EXPECT_GT(r.p_value, 0.01) << "chi2 " << r.statistic << " dof " << r.dof;
  EXPECT_GT(acc, 0.0);
  std::printf("constrained mtp, draft vocabulary 128: chi2 %.1f dof %d p %.3f (acceptance %.3f)\n", r.statistic, r.dof,
              r.p_value, acc);
}

TEST(Distribution, ConstrainedDraftModelIsLossless) {
  expect_constrained_lossless(draft_model_options(3), "constrained draft");
}

TEST(Distribution, ConstrainedNgramIsLossless) {
  expect_constrained_lossless(spec_options(target_model(), "ngram", 3), "constrained ngram");
}

TEST(Distribution, ConstrainedBrokenRuleIsDetected) {
  // The same test has the power to see a wrong rejection rule under the constraint.
  double acc = 0;
  auto bad = histogram(draft_model_options(3), 2000000, &acc, kWordsGrammar, false, testing::resample_from_target);
  auto r = homogeneity(constrained_plain_histogram(), bad);
  EXPECT_LT(r.p_value, 0.01) << "the broken rule went unnoticed: chi2 " << r.statistic << " dof " << r.dof;
  std::printf("constrained broken rule: chi2 %.1f dof %d p %.3g (acceptance %.3f)\n", r.statistic, r.dof, r.p_value, acc);
}

TEST(Distribution, BrokenAcceptanceRuleIsDetected) {
  double acc = 0;
  auto bad = histogram(draft_model_options(3), 2000000, &acc, nullptr, false, testing::resample_from_target);
  auto r = homogeneity(plain_histogram(), bad);
  EXPECT_LT(r.p_value, 0.01) << "the broken rule went unnoticed: chi2 " << r.statistic << " dof " << r.dof;
  std::printf("broken rule: chi2 %.1f dof %d p %.3g (acceptance %.3f)\n", r.statistic, r.dof, r.p_value, acc);
}

}  // namespace
}  // namespace nextn
