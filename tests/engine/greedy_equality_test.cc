// tests/engine/greedy_equality_test.cc — speculative greedy decoding must give the
// same tokens as plain greedy decoding, for every drafter and N = 1..4, including
// drafters that really get accepted (self-draft, n-gram on repetitive text) so the
// rollback of partially accepted steps is exercised.
#include <map>

#include "engine_test_util.h"

namespace nextn {
namespace {

using namespace nextn::testing;

const std::vector<int32_t> kPrompt = {3, 17, 42, 99, 5, 17, 42, 99, 5, 17, 42, 7, 250, 12};
const std::vector<int32_t> kPrompt2 = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4};
constexpr int kTokens = 40;

struct Case {
  std::string name;
  std::string model;
  std::string mode;
  std::string extra;  // assistant / draft model dir
  int draft_vocab = -1;
};

std::vector<int32_t> plain_tokens(const std::string& model, const std::vector<int32_t>& prompt, SamplingParams sp,
                                  int n_tokens) {
  static std::map<std::string, std::vector<int32_t>> cache;
  std::string key = model + "|" + std::to_string(prompt.size()) + "|" + std::to_string(sp.repetition_penalty) + "|" +
                    std::to_string(n_tokens);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Engine engine(base_options(model));
  auto req = greedy_request(prompt, n_tokens);
  req.sampling = sp;
  auto r = run_one(engine, std::move(req));
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EXPECT_EQ(int(r.tokens.size()), n_tokens);
  return cache[key] = r.tokens;
}

void check_equal(const Case& c, int n, double* acceptance = nullptr, SamplingParams sp = {}, int n_tokens = kTokens) {
  EngineOptions o = spec_options(c.model, c.mode, n);
  if (c.mode == "assistant") o.speculative.assistant_dir = c.extra;
  if (c.mode == "draft" || c.mode == "eagle3" || c.mode == "dflash") o.speculative.draft_model_dir = c.extra;
  o.speculative.draft_vocab = c.draft_vocab;
  Engine engine(o);
  int drafted = 0, accepted = 0;
  for (const auto& prompt : {kPrompt, kPrompt2}) {
    auto want = plain_tokens(c.model, prompt, sp, n_tokens);
    auto req = greedy_request(prompt, n_tokens);
    req.sampling = sp;
    auto r = run_one(engine, std::move(req));
    EXPECT_EQ(r.tokens, want) << c.name << " N=" << n;
    EXPECT_GT(r.timings.speculative.draft_tokens, 0) << c.name;
    EXPECT_EQ(r.timings.drafter, c.mode);
    drafted += r.timings.speculative.draft_tokens;
    accepted += r.timings.speculative.accepted;
  }
  if (acceptance) *acceptance = drafted ? double(accepted) / drafted : 0.0;
}

TEST(GreedyEquality, MtpMiMo) {
  for (int n = 1; n <= 4; ++n) check_equal({"mtp-mimo", mimo_model(), "mtp", ""}, n);
}

TEST(GreedyEquality, MtpDeepSeekLayout) {
  for (int n = 1; n <= 4; ++n) check_equal({"mtp-deepseek", deepseek_model(), "mtp", ""}, n);
}

TEST(GreedyEquality, MtpQwen3_5Hybrid) {
  // Recurrent layers roll back to the snapshot of the last accepted row.
  for (int n = 1; n <= 4; ++n) check_equal({"mtp-qwen3.5", qwen3_5_model(), "mtp", ""}, n);
}

TEST(GreedyEquality, NgramQwen3_5Hybrid) {
  for (int n = 1; n <= 4; ++n) {
    double acc = 0;
    check_equal({"ngram-qwen3.5", qwen3_5_model(), "ngram", ""}, n, &acc, {}, 120);
    EXPECT_GT(acc, 0.0) << "N=" << n;  // accepted drafts exercise the partial rollback
  }
}

TEST(GreedyEquality, SelfDraftQwen3_5Hybrid) {
  // The hybrid as its own draft model: every draft accepted (the draft model's state
  // cannot return into its drafted rows, so it re-prefills: slower, still exact).
  double acc = 0;
  check_equal({"self-draft-qwen3.5", qwen3_5_model(), "draft", qwen3_5_model()}, 3, &acc);
  EXPECT_GT(acc, 0.99);
}

TEST(GreedyEquality, MtpReducedDraftVocabulary) {
  // Drafts only among the first 200 ids: still exact.
  for (int n = 1; n <= 3; ++n) check_equal({"mtp-dv200", mimo_model(), "mtp", "", 200}, n);
}

TEST(GreedyEquality, MtpTwoLayersRecursive) {
  for (int n = 1; n <= 4; ++n) check_equal({"mtp-mimo-2", mimo2_model(), "mtp", ""}, n);
}

TEST(GreedyEquality, Assistant) {
  for (int n = 1; n <= 4; ++n) check_equal({"assistant", qwen3_model(), "assistant", assistant_model()}, n);
}

TEST(GreedyEquality, Gemma4Assistant) {
  // Drafts over the target's own KV (sliding ring included), nothing of its own to roll back.
  for (int n = 1; n <= 4; ++n)
    check_equal({"assistant", gemma4_model(), "assistant", gemma4_assistant_model()}, n, nullptr, {}, 150);
}

TEST(GreedyEquality, SelfDraftGemma4) {
  // Every draft accepted, past the window and around the ring (150 tokens, ring 8 + 32).
  double acc = 0;
  check_equal({"draft", gemma4_model(), "draft", gemma4_model()}, 4, &acc, {}, 150);
  EXPECT_GT(acc, 0.99);
}

TEST(GreedyEquality, NgramGemma4) {
  // Partial acceptance: the verify rows rejected after an accepted prefix are truncated
  // from the window rings.
  for (int n = 1; n <= 4; ++n) check_equal({"ngram", gemma4_model(), "ngram", ""}, n, nullptr, {}, 150);
}

// Mixture of Experts: verify rows route to other experts than decode rows; the result
// must not depend on how rows are grouped by expert.
TEST(GreedyEquality, MtpQwen3_5Moe) {
  for (int n = 1; n <= 4; ++n) check_equal({"mtp-qwen3.5-moe", qwen3_5_moe_model(), "mtp", ""}, n);
}

TEST(GreedyEquality, SelfDraftQwen3_5Moe) {
  // Every draft accepted: verify batches of several rows through the routed layers.
  double acc = 0;
  check_equal({"self-draft-qwen3.5-moe", qwen3_5_moe_model(), "draft", qwen3_5_moe_model()}, 3, &acc);
  EXPECT_GT(acc, 0.99);
}

TEST(GreedyEquality, MtpGlm4Moe) {
  for (int n = 1; n <= 4; ++n) check_equal({"mtp-glm4-moe", glm4_moe_model(), "mtp", ""}, n);
}

TEST(GreedyEquality, NgramGlm4Moe) {
  for (int n = 1; n <= 4; ++n) check_equal({"ngram-glm4-moe", glm4_moe_model(), "ngram", ""}, n, nullptr, {}, 120);
}

TEST(GreedyEquality, Gemma4MoeAssistant) {
  for (int n = 1; n <= 4; ++n)
    check_equal({"assistant-gemma4-moe", gemma4_moe_model(), "assistant", gemma4_moe_assistant_model()}, n);
}

TEST(GreedyEquality, Eagle3) {
  for (int n = 1; n <= 4; ++n) check_equal({"eagle3", qwen3_model(), "eagle3", eagle3_model()}, n);
}

TEST(GreedyEquality, Eagle3AndDFlashOnEveryFamily) {
  // Drafters reading the target's layer inputs on the hybrid (recurrent rollback), Gemma 4
  // (sliding rings, KV sharing) and Mixture-of-Experts targets.
  const std::pair<const char*, std::string> targets[] = {
      {"qwen3_5", qwen3_5_model()}, {"gemma4", gemma4_model()}, {"qwen3_5_moe", qwen3_5_moe_model()}};
  for (const auto& [name, target] : targets) {
    const std::string n(name);
    check_equal({"eagle3-" + n, target, "eagle3", checkpoint(n + "_eagle3", "--eagle3-of " + target + " --seed 8")}, 3);
    check_equal({"dflash-" + n, target, "dflash",
                 checkpoint(n + "_dflash", "--dflash-of " + target + " --dflash-layers 2 --block-size 8 --seed 8")},
                5);
  }
}

TEST(GreedyEquality, Eagle3ConcurrentSequences) {
  // Several sequences of different lengths drafting together, at a fixed depth and with
  // depths chosen per sequence and step (0 included).
  Engine plain(base_options(qwen3_model()));
  std::vector<std::vector<int32_t>> prompts = {kPrompt, kPrompt2, {9, 8, 7}, {100, 200, 300, 100, 200, 5, 6}};
  for (bool adaptive : {false, true}) {
    EngineOptions o = spec_options(qwen3_model(), "eagle3", 4);
    o.speculative.draft_model_dir = eagle3_model();
    o.speculative.adaptive = adaptive;
    o.parallel = 4;
    Engine engine(o);
    std::vector<GenerationRequest> reqs;
    for (auto& p : prompts) reqs.push_back(greedy_request(p, 32));
    auto results = run_all(engine, std::move(reqs));
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(results[i].tokens, run_one(plain, greedy_request(prompts[i], 32)).tokens) << "prompt " << i;
      if (!adaptive) {
        EXPECT_GT(results[i].timings.speculative.draft_tokens, 0);
      }
    }
  }
}

TEST(GreedyEquality, DraftModel) {
  for (int n = 1; n <= 4; ++n) check_equal({"draft", qwen3_model(), "draft", qwen3_draft_model()}, n);
}

TEST(GreedyEquality, DFlash) {
  // k + 1 block rows per step; 7 asks for more than block_size - 1 = 5 drafts (clamped).
  for (int n : {1, 2, 3, 5, 7}) check_equal({"dflash", qwen3_model(), "dflash", dflash_model()}, n);
}

TEST(GreedyEquality, DFlashReducedDraftVocabulary) {
  check_equal({"dflash", qwen3_model(), "dflash", dflash_model(), 100}, 3);
}

TEST(GreedyEquality, DFlashConcurrentSequencesOfDifferentDepths) {
  // One drafter forward holds every sequence's block: contexts of different lengths,
  // blocks of different sizes (the depth asked per request), sequences joining and leaving.
  EngineOptions o = spec_options(qwen3_model(), "dflash", 4);
  o.speculative.draft_model_dir = dflash_model();
  o.parallel = 4;
  Engine engine(o);
  std::vector<std::vector<int32_t>> prompts = {kPrompt, kPrompt2, {9, 8, 7}, {100, 200, 300, 100, 200}, {44}};
  const int depths[] = {1, 5, 3, 2, 4};
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    reqs.push_back(greedy_request(prompts[i], 20 + 4 * int(i)));
    reqs.back().num_draft_tokens = depths[i];
  }
  auto results = run_all(engine, std::move(reqs));
  Engine plain(base_options(qwen3_model()));
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto want = run_one(plain, greedy_request(prompts[i], 20 + 4 * int(i)));
    EXPECT_EQ(results[i].tokens, want.tokens) << "prompt " << i;
    EXPECT_GT(results[i].timings.speculative.draft_tokens, 0) << "prompt " << i;
    EXPECT_EQ(results[i].timings.drafter, "dflash");
  }
}

TEST(GreedyEquality, SelfDraftIsFullyAccepted) {
  // The target as its own draft model: every draft is accepted, so this checks the
  // all-accepted path (bonus token, KV kept) over many steps.
  for (int n = 1; n <= 4; ++n) {
    double acc = 0;
    check_equal({"self-draft", qwen3_model(), "draft", qwen3_model()}, n, &acc);
    EXPECT_GT(acc, 0.99) << "N=" << n;
  }
}

TEST(GreedyEquality, Ngram) {
  for (int n = 1; n <= 4; ++n) {
    double acc = 0;
    check_equal({"ngram", mimo_model(), "ngram", ""}, n, &acc, {}, 200);
    std::printf("ngram N=%d acceptance %.3f\n", n, acc);
    EXPECT_GT(acc, 0.0) << "N=" << n;  // tiny random models end in loops: lookups get accepted
  }
}

TEST(GreedyEquality, Suffix) {
  for (int n = 1; n <= 4; ++n) {
    double acc = 0;
    check_equal({"suffix", mimo_model(), "suffix", ""}, n, &acc, {}, 200);
    std::printf("suffix N=%d acceptance %.3f\n", n, acc);
    EXPECT_GT(acc, 0.0) << "N=" << n;
  }
}

TEST(GreedyEquality, MtpChainedWithSuffix) {
  // Steps where the suffix lookup finds a long match draft with it, the others with MTP.
  for (int n = 1; n <= 4; ++n) {
    double acc = 0;
    check_equal({"mtp+suffix", mimo_model(), "mtp+suffix", ""}, n, &acc, {}, 200);
    EXPECT_GT(acc, 0.0) << "N=" << n;
  }
}

TEST(GreedyEquality, ChainCountsEachPart) {
  // A chained drafter's counters split by the part that proposed each step's drafts.
  Engine engine(spec_options(mimo_model(), "mtp+suffix", 4));
  auto r = run_one(engine, greedy_request(kPrompt, 200));
  const SpeculativeCounters& c = r.timings.speculative;
  uint64_t drafted = 0, accepted = 0, steps = 0;
  std::vector<std::string> names;
  for (const auto& d : c.by_drafter) {
    names.push_back(d.name);
    drafted += d.draft_tokens, accepted += d.accepted, steps += d.drafts;
  }
  for (const std::string& n : names) EXPECT_TRUE(n == "mtp" || n == "suffix") << n;
  EXPECT_EQ(names.size(), 2u) << "both parts drafted in 200 tokens of a looping random model";
  EXPECT_EQ(drafted, c.draft_tokens);
  EXPECT_EQ(steps, c.drafts);
  EXPECT_GE(accepted, c.accepted);  // the answer's counters drop what was accepted past its end
}

TEST(GreedyEquality, SuffixQwen3_5Hybrid) {
  for (int n = 1; n <= 4; ++n) check_equal({"suffix-qwen3.5", qwen3_5_model(), "suffix", ""}, n, nullptr, {}, 120);
}

TEST(GreedyEquality, WithRepetitionPenalty) {
  // Penalties change each verify row's argmax depending on the drafts before it.
  SamplingParams sp;
  sp.repetition_penalty = 1.3f;
  double acc = 0;
  check_equal({"self-draft-penalty", qwen3_model(), "draft", qwen3_model()}, 3, &acc, sp);
  EXPECT_GT(acc, 0.1);  // drafts ignore penalties, so only some are accepted
}

TEST(GreedyEquality, ConcurrentSequencesMatchSequentialOnes) {
  EngineOptions o = spec_options(mimo_model(), "mtp", 3);
  o.parallel = 4;
  Engine engine(o);
  std::vector<std::vector<int32_t>> prompts = {kPrompt, kPrompt2, {9, 8, 7}, {100, 200, 300, 100, 200}};
  std::vector<GenerationRequest> reqs;
  for (auto& p : prompts) reqs.push_back(greedy_request(p, 24));
  auto results = run_all(engine, std::move(reqs));
  Engine plain(base_options(mimo_model()));
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto want = run_one(plain, greedy_request(prompts[i], 24));
    EXPECT_EQ(results[i].tokens, want.tokens) << "prompt " << i;
  }
}

}  // namespace
}  // namespace nextn
