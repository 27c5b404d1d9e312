// tests/engine/engine_test.cc — scheduler behaviour: max_tokens and stop tokens,
// seeded reproducibility, prefix cache, cancellation (callback and cancel()),
// bounded queue, synthetic acceptance stamping, drafter start-up errors, stats.
#include <atomic>
#include <thread>

#include "engine_test_util.h"
#include "util/error.h"

namespace nextn {
namespace {

using namespace nextn::testing;

const std::vector<int32_t> kPrompt = {3, 17, 42, 99, 5, 17, 42, 99, 5, 17, 42, 7, 250, 12};

TEST(Engine, StopTokenEndsGenerationAndIsNotEmitted) {
  Engine engine(base_options(mimo_model()));
  auto full = run_one(engine, greedy_request(kPrompt, 12));
  ASSERT_EQ(full.tokens.size(), 12u);
  auto req = greedy_request(kPrompt, 12);
  req.stop_tokens = {full.tokens[5]};
  auto r = run_one(engine, std::move(req));
  EXPECT_EQ(r.reason, FinishReason::kStop);
  size_t first = 0;
  while (full.tokens[first] != full.tokens[5]) ++first;
  EXPECT_EQ(r.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + long(first)));
}

TEST(Engine, SameSeedSameOutputWithAndWithoutSpeculation) {
  for (const char* mode : {"none", "mtp"}) {
    EngineOptions o = spec_options(mimo_model(), mode, 3);
    Engine engine(o);
    auto make = [](uint64_t seed) {
      auto r = greedy_request(kPrompt, 32);
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = seed;
      r.sampling.has_seed = true;
      return r;
    };
    auto a = run_one(engine, make(5)), b = run_one(engine, make(5)), c = run_one(engine, make(6));
    EXPECT_EQ(a.tokens, b.tokens) << mode;
    EXPECT_NE(a.tokens, c.tokens) << mode;
  }
}

TEST(Engine, PrefixCacheReusesThePromptAndKeepsOutputs) {
  for (const char* mode : {"none", "mtp"}) {
    EngineOptions o = spec_options(mimo_model(), mode, 2);
    Engine engine(o);
    auto first = run_one(engine, greedy_request(kPrompt, 8));
    EXPECT_EQ(first.timings.cache_n, 0);
    std::vector<int32_t> longer = kPrompt;
    longer.insert(longer.end(), {8, 9, 10});
    auto second = run_one(engine, greedy_request(longer, 8));
    EXPECT_EQ(second.timings.cache_n, int(kPrompt.size())) << mode;
    EXPECT_EQ(second.timings.prompt_n, 3) << mode;
    Engine fresh(o);
    auto want = run_one(fresh, greedy_request(longer, 8));
    EXPECT_EQ(second.tokens, want.tokens) << mode;
    // Same prompt again: everything but the last prompt row is reused.
    auto third = run_one(engine, greedy_request(longer, 8));
    EXPECT_EQ(third.timings.cache_n, int(longer.size()) - 1);
    EXPECT_EQ(third.tokens, want.tokens);
  }
}

TEST(Engine, CallbackCancellationStopsWithinTheStep) {
  EngineOptions o = spec_options(qwen3_model(), "draft", 4);
  o.speculative.draft_model_dir = qwen3_model();  // accepts everything: 5 tokens per step
  Engine engine(o);
  auto req = greedy_request(kPrompt, 100);
  int seen = 0;
  req.on_token = [&](const TokenEvent&) { return ++seen < 3; };
  auto r = run_one(engine, std::move(req));
  EXPECT_EQ(r.reason, FinishReason::kCancelled);
  EXPECT_EQ(r.tokens.size(), 3u);
  // The slot is free again and the next request is unaffected.
  auto next = run_one(engine, greedy_request(kPrompt, 10));
  EXPECT_EQ(next.reason, FinishReason::kLength);
  Engine plain(base_options(qwen3_model()));
  EXPECT_EQ(next.tokens, run_one(plain, greedy_request(kPrompt, 10)).tokens);
}

TEST(Engine, CancelById) {
  std::atomic<uint64_t> id{0};
  std::atomic<int> count{0};
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  FinishReason reason = FinishReason::kNone;
  Engine engine(base_options(mimo_model()));  // after what its callbacks use: destroyed first
  auto req = greedy_request(kPrompt, 400);
  req.on_token = [&](const TokenEvent&) {
    count++;
    return true;
  };
  req.on_done = [&](FinishReason r, const Timings&, const std::string&) {
    std::lock_guard lock(mu);
    reason = r;
    done = true;
    cv.notify_all();
  };
  id = engine.submit(std::move(req));
  while (count.load() < 2) std::this_thread::yield();
  engine.cancel(id);
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  EXPECT_EQ(reason, FinishReason::kCancelled);
  EXPECT_LT(count.load(), 400);
}

TEST(Engine, FullQueueIsAResourceError) {
  EngineOptions o = base_options(mimo_model());
  o.queue_size = 0;
  // Declared before the engine, so it outlives the engine thread that still runs the
  // slow request's callback after the test body ends (ASan: stack-use-after-scope).
  std::atomic<bool> release{false};
  Engine engine(o);
  auto slow = greedy_request(kPrompt, 50);
  slow.on_token = [&](const TokenEvent&) {
    while (!release.load()) std::this_thread::yield();
    return true;
  };
  engine.submit(std::move(slow));
  try {
    engine.submit(greedy_request(kPrompt, 5));
    ADD_FAILURE() << "expected a full queue";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
  }
  release = true;
}

TEST(Engine, BadRequests) {
  EngineOptions o = base_options(mimo_model());
  Engine engine(o);
  auto expect_bad = [&](GenerationRequest r) {
    try {
      engine.submit(std::move(r));
      ADD_FAILURE() << "expected kBadInput";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
    }
  };
  expect_bad(greedy_request({}, 4));
  expect_bad(greedy_request(std::vector<int32_t>(size_t(o.ctx_size), 1), 4));
  expect_bad(greedy_request({1, 100000}, 4));
}

TEST(Engine, SyntheticAcceptanceIsStamped) {
  EngineOptions o = spec_options(mimo_model(), "mtp", 3);
  o.speculative.synthetic_accept = 1.0;
  Engine engine(o);
  auto r = run_one(engine, greedy_request(kPrompt, 33));
  EXPECT_EQ(r.tokens.size(), 33u);
  EXPECT_DOUBLE_EQ(r.timings.synthetic_accept, 1.0);
  EXPECT_EQ(r.timings.speculative.draft_tokens, r.timings.speculative.accepted);
  EXPECT_EQ(r.timings.speculative.drafts, 8);  // 1 token from the prompt pass + 8 steps of 4
  EXPECT_DOUBLE_EQ(r.timings.speculative.mean_accepted_length(), 4.0);
  ASSERT_EQ(r.timings.speculative.accepted_per_pos.size(), 3u);
  auto stats = engine.stats();
  EXPECT_EQ(stats.speculative.drafts, 8u);
  EXPECT_EQ(stats.speculative.draft_tokens, 24u);
  EXPECT_EQ(stats.speculative.accepted, 24u);
  EXPECT_EQ(stats.speculative.accepted_per_pos, (std::vector<uint64_t>{8, 8, 8}));
  EXPECT_GT(stats.kv_bytes_used, 0u);
}

// Every emitted token says how its step made it; read back step by step, the sources
// must rebuild the request's own speculative counters.
TEST(Engine, TokenSourcesRebuildTheSpeculativeCounters) {
  for (double synthetic : {-1.0, 0.5, 1.0}) {
    EngineOptions o = spec_options(mimo_model(), "mtp", 3);
    o.speculative.synthetic_accept = synthetic;
    Engine engine(o);
    std::vector<TokenEvent> events;
    auto req = greedy_request(kPrompt, 40);
    req.on_token = [&](const TokenEvent& ev) {
      events.push_back(ev);
      return true;
    };
    auto r = run_one(engine, std::move(req));
    ASSERT_EQ(events.size(), 40u);
    EXPECT_EQ(events[0].source, TokenSource::kTarget);  // from the prompt pass
    SpeculativeCounters rebuilt;
    int in_step = 0;  // tokens of the current step seen so far
    for (size_t i = 1; i < events.size(); ++i) {
      const TokenEvent& ev = events[i];
      EXPECT_EQ(ev.position, in_step + 1) << i;
      if (ev.source == TokenSource::kDraft) {
        EXPECT_LE(ev.position, ev.drafts) << i;
        ++in_step;
        continue;
      }
      // The step's last token: the target's.
      int accepted = ev.position - 1;
      switch (ev.source) {
        case TokenSource::kTarget: EXPECT_EQ(ev.drafts, 0) << i; break;
        case TokenSource::kBonus: EXPECT_EQ(accepted, ev.drafts) << i; break;
        case TokenSource::kCorrection: EXPECT_LT(accepted, ev.drafts) << i; break;
        default: ADD_FAILURE() << i;
      }
      if (ev.drafts > 0) rebuilt.record(ev.drafts, accepted);
      in_step = 0;
    }
    EXPECT_EQ(in_step, 0) << "the last step was cut short";
    EXPECT_EQ(rebuilt.drafts, r.timings.speculative.drafts) << synthetic;
    EXPECT_EQ(rebuilt.draft_tokens, r.timings.speculative.draft_tokens) << synthetic;
    EXPECT_EQ(rebuilt.accepted, r.timings.speculative.accepted) << synthetic;
    EXPECT_EQ(rebuilt.accepted_per_pos, r.timings.speculative.accepted_per_pos) << synthetic;
    EXPECT_EQ(rebuilt.drafted_per_pos, r.timings.speculative.drafted_per_pos) << synthetic;
  }
  Engine plain(base_options(mimo_model()));
  auto req = greedy_request(kPrompt, 10);
  int targets = 0;
  req.on_token = [&](const TokenEvent& ev) {
    targets += ev.source == TokenSource::kTarget && ev.position == 1 && ev.drafts == 0;
    return true;
  };
  run_one(plain, std::move(req));
  EXPECT_EQ(targets, 10);
}

TEST(Engine, PerRequestSpeculationSwitch) {
  Engine engine(spec_options(mimo_model(), "mtp", 3));
  auto req = greedy_request(kPrompt, 10);
  req.speculative = false;
  auto r = run_one(engine, std::move(req));
  EXPECT_EQ(r.timings.speculative.draft_tokens, 0);
  auto req2 = greedy_request(kPrompt, 10);
  req2.num_draft_tokens = 1;
  auto r2 = run_one(engine, std::move(req2));
  EXPECT_EQ(r2.timings.speculative.drafted_per_pos.size(), 1u);
  EXPECT_EQ(r2.tokens, r.tokens);
}

TEST(Engine, AdaptiveDepthKeepsGreedyOutput) {
  EngineOptions o = spec_options(qwen3_model(), "draft", 8);
  o.speculative.adaptive = true;
  o.speculative.draft_model_dir = qwen3_model();
  Engine engine(o);
  auto r = run_one(engine, greedy_request(kPrompt, 60));
  Engine plain(base_options(qwen3_model()));
  EXPECT_EQ(r.tokens, run_one(plain, greedy_request(kPrompt, 60)).tokens);
  EXPECT_GT(r.timings.speculative.draft_tokens, 0);
}

TEST(Engine, StartupErrors) {
  auto expect_error = [](EngineOptions o, const std::string& needle) {
    try {
      Engine e(o);
      ADD_FAILURE() << "expected an error containing " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(spec_options(qwen3_model(), "mtp", 3), "no MTP layers");
  EngineOptions d = spec_options(qwen3_model(), "draft", 3);
  d.speculative.draft_model_dir = checkpoint("qwen3_v512", "--arch qwen3 --vocab 512 --seed 4");
  expect_error(d, "512");
  expect_error(d, "448");
  expect_error(spec_options(qwen3_model(), "bogus", 3), "unknown drafter");
}

}  // namespace
}  // namespace nextn
