// tests/engine/batched_step_test.cc — the batched speculative step keeps greedy output
// identical to plain decoding for every drafter and model family while up to eight
// sequences share each step: prompts of different lengths, per-request depth bounds
// that differ inside one step (0 included), the planner's own depths (`auto`),
// sequences finishing at different lengths, one cancelled mid-answer, requests joining
// while others are mid-answer, and the same prompts again (prefix-cache hits).
#include <atomic>
#include <map>
#include <thread>

#include "engine_test_util.h"

namespace nextn {
namespace {

using namespace nextn::testing;

struct Family {
  std::string name;
  std::string model;
  std::string mode;   // drafter
  std::string extra;  // assistant / draft model directory
  // Whether the same prompt again reuses its cached prefix (recurrent and sliding-window
  // states return only to some lengths: there the prompt may be run again whole).
  bool prefix_cache = false;
};

// Eight prompts of different lengths (repetitive ones, so n-gram drafts are accepted).
std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (int p = 0; p < 8; ++p) {
    std::vector<int32_t> prompt;
    const int length = 3 + 5 * p;
    for (int i = 0; i < length; ++i) prompt.push_back(int32_t(1 + (i % (3 + p)) * 17 + p * 5));
    out.push_back(prompt);
  }
  return out;
}

int max_tokens_of(size_t i) { return 12 + 7 * int(i % 5); }     // finishing at different steps
int depth_bound_of(size_t i) { return int(i % 5) - (i == 7); }  // 0..4, and -1: the engine's own

std::vector<int32_t> plain_tokens(const std::string& model, const std::vector<int32_t>& prompt, int n) {
  static std::map<std::string, std::vector<int32_t>> cache;
  std::string key = model + "|" + std::to_string(prompt.size()) + "|" + std::to_string(prompt.back()) + "|" +
                    std::to_string(n);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  Engine engine(base_options(model));
  auto r = run_one(engine, greedy_request(prompt, n));
  EXPECT_EQ(int(r.tokens.size()), n);
  return cache[key] = r.tokens;
}

void check_family(const Family& f, bool adaptive) {
  const std::string what = f.name + (adaptive ? " auto" : " fixed");
  EngineOptions o = spec_options(f.model, f.mode, 4);
  if (f.mode == "assistant") o.speculative.assistant_dir = f.extra;
  if (f.mode == "draft") o.speculative.draft_model_dir = f.extra;
  o.speculative.adaptive = adaptive;
  o.parallel = 8;
  Engine engine(o);
  const auto all = prompts();
  for (int round = 0; round < 2; ++round) {  // the second round reuses cached prefixes
    // Five requests start together; three more join once the first has emitted 4 tokens.
    std::vector<GenerationRequest> first, late;
    std::atomic<bool> joined{false};
    std::vector<RunResult> late_results;
    std::vector<GenerationRequest> late_requests;
    for (size_t i = 0; i < all.size(); ++i) {
      GenerationRequest r = greedy_request(all[i], max_tokens_of(i));
      r.num_draft_tokens = depth_bound_of(i);
      if (i == 3) {
        // Cancelled after 9 tokens: what it emitted is the plain answer's beginning.
        auto seen = std::make_shared<int>(0);
        r.on_token = [seen](const TokenEvent&) { return ++*seen < 9; };
      }
      (i < 5 ? first : late).push_back(std::move(r));
    }
    std::mutex late_mu;
    std::condition_variable late_cv;
    bool late_done = false;
    // Submitted from the engine thread, in the middle of a step's emission.
    first[0].on_token = [&](const TokenEvent&) {
      if (!joined.exchange(true)) {
        std::thread([&] {
          auto results = run_all(engine, std::move(late));
          std::lock_guard lock(late_mu);
          late_results = std::move(results);
          late_done = true;
          late_cv.notify_all();
        }).detach();
      }
      return true;
    };
    auto results = run_all(engine, std::move(first));
    {
      std::unique_lock lock(late_mu);
      late_cv.wait(lock, [&] { return late_done; });
    }
    results.insert(results.end(), late_results.begin(), late_results.end());
    ASSERT_EQ(results.size(), all.size());
    int drafted = 0, cached = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const auto want = plain_tokens(f.model, all[i], max_tokens_of(i));
      if (i == 3) {
        EXPECT_EQ(results[i].reason, FinishReason::kCancelled) << what;
        ASSERT_EQ(results[i].tokens.size(), 9u) << what;
        EXPECT_EQ(results[i].tokens, std::vector<int32_t>(want.begin(), want.begin() + 9)) << what;
        continue;
      }
      EXPECT_EQ(results[i].tokens, want) << what << " round " << round << " sequence " << i;
      EXPECT_EQ(results[i].reason, FinishReason::kLength) << what;
      if (depth_bound_of(i) == 0) {
        EXPECT_EQ(results[i].timings.speculative.draft_tokens, 0u) << what;
      }
      drafted += int(results[i].timings.speculative.draft_tokens);
      cached += results[i].timings.cache_n;
    }
    if (!adaptive) {
      EXPECT_GT(drafted, 0) << what;
    }
    if (round == 1 && f.prefix_cache) {
      EXPECT_GT(cached, 0) << what;
    }
  }
}

std::vector<Family> families() {
  return {
    {"mtp dense (MiMo)", mimo_model(), "mtp", "", true},
    {"mtp dense, 2 layers", mimo2_model(), "mtp", "", true},
    {"mtp hybrid (Qwen3.5)", qwen3_5_model(), "mtp", ""},
    {"ngram hybrid", qwen3_5_model(), "ngram", ""},
    {"suffix hybrid", qwen3_5_model(), "suffix", ""},
    {"assistant (MTP checkpoint)", qwen3_model(), "assistant", assistant_model(), true},
    {"draft model", qwen3_model(), "draft", qwen3_draft_model(), true},
    {"Gemma 4 assistant", gemma4_model(), "assistant", gemma4_assistant_model()},
    {"mtp MoE (Qwen3.5-MoE)", qwen3_5_moe_model(), "mtp", ""},
    {"mtp MoE (GLM-4.5)", glm4_moe_model(), "mtp", "", true},
  };
}

TEST(BatchedStep, FixedDepthBoundsMatchPlainDecoding) {
  for (const Family& f : families()) check_family(f, false);
}

TEST(BatchedStep, PlannedDepthsMatchPlainDecoding) {
  for (const Family& f : families()) check_family(f, true);
}

}  // namespace
}  // namespace nextn
