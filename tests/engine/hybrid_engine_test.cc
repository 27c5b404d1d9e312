// tests/engine/hybrid_engine_test.cc — the engine on a hybrid model (Qwen3.5: recurrent
// Gated DeltaNet layers beside attention layers): the prefix cache reuses only lengths
// the state can return to and gives the same tokens as a fresh engine; a new conversation
// leaves other conversations' slots alone; memory of the recurrent state and its
// snapshots is reported.
#include "engine_test_util.h"

namespace nextn {
namespace {

using namespace nextn::testing;

const std::vector<int32_t> kPrompt = {3, 17, 42, 99, 5, 17, 42, 99, 5, 17, 42, 7, 250, 12};

TEST(HybridEngine, PrefixReuseEqualsAFreshRun) {
  for (const char* mode : {"none", "mtp"}) {
    EngineOptions o = spec_options(qwen3_5_model(), mode, 3);
    Engine engine(o);
    Engine fresh(o);
    auto first = run_one(engine, greedy_request(kPrompt, 8));
    ASSERT_EQ(first.tokens.size(), 8u);
    // The next turn extends everything in the state (prompt + 7 of the 8 outputs; the
    // last output was never fed): reused whole.
    std::vector<int32_t> next = kPrompt;
    next.insert(next.end(), first.tokens.begin(), first.tokens.end() - 1);
    next.insert(next.end(), {8, 9, 10});
    auto second = run_one(engine, greedy_request(next, 8));
    EXPECT_EQ(second.timings.cache_n, int(kPrompt.size()) + 7) << mode;
    EXPECT_EQ(second.tokens, run_one(fresh, greedy_request(next, 8)).tokens) << mode;
    // A prompt that diverges inside the cached tokens: the recurrent layers cannot
    // return there, so nothing is reused — and the output is still a fresh run's.
    std::vector<int32_t> diverged(kPrompt.begin(), kPrompt.begin() + 6);
    diverged.push_back(77);
    auto third = run_one(engine, greedy_request(diverged, 8));
    EXPECT_EQ(third.timings.cache_n, 0) << mode;
    EXPECT_EQ(third.tokens, run_one(fresh, greedy_request(diverged, 8)).tokens) << mode;
  }
}

// Two conversations that begin alike (a shared system prompt), two slots: the second
// takes the empty slot instead of the first's, whose common beginning a recurrent state
// cannot return to anyway, so the first conversation's next turn still reuses all of it.
// Once no slot is empty, a new prompt takes the least recently used one.
TEST(HybridEngine, NewConversationKeepsOffAnotherConversationsSlot) {
  EngineOptions o = base_options(qwen3_5_model());
  o.parallel = 2;
  Engine engine(o);
  auto a1 = run_one(engine, greedy_request(kPrompt, 4));
  std::vector<int32_t> other(kPrompt.begin(), kPrompt.begin() + 8);
  other.push_back(77);
  auto b1 = run_one(engine, greedy_request(other, 4));
  EXPECT_EQ(b1.timings.cache_n, 0);
  std::vector<int32_t> a2 = kPrompt;
  a2.insert(a2.end(), a1.tokens.begin(), a1.tokens.end() - 1);
  a2.push_back(9);
  auto a2r = run_one(engine, greedy_request(a2, 4));
  EXPECT_EQ(a2r.timings.cache_n, int(kPrompt.size()) + 3);
  // A third conversation takes b's slot (used longer ago than a's, which a2 used last):
  // a's next turn still finds its own.
  auto c1 = run_one(engine, greedy_request({200, 201, 202}, 4));
  EXPECT_EQ(c1.timings.cache_n, 0);
  std::vector<int32_t> a3 = a2;
  a3.insert(a3.end(), a2r.tokens.begin(), a2r.tokens.end() - 1);
  a3.push_back(10);
  EXPECT_EQ(run_one(engine, greedy_request(a3, 4)).timings.cache_n, int(a2.size()) + 3);
}

TEST(HybridEngine, ReportsRecurrentStateAndSnapshots) {
  Engine engine(spec_options(qwen3_5_model(), "mtp", 3));
  auto r = run_one(engine, greedy_request(kPrompt, 12));
  EXPECT_EQ(r.reason, FinishReason::kLength);
  EngineStats s = engine.stats();
  // 3 DeltaNet layers of the tiny shape: S [4 heads, 16, 24] + conv window [3, 2*2*16 + 4*24].
  const size_t per_layer = (4 * 16 * 24 + 3 * (2 * 2 * 16 + 4 * 24)) * sizeof(float);
  EXPECT_EQ(s.recurrent_bytes, 3 * per_layer);
  // Rollback keeps, per layer, no plane (a verify writes none: the rows it re-applies go
  // into the one plane in place, its own rows only into its log) but the logs of the rows
  // of the last verify and of the one before (4 rows: 3 drafts + 1). A row's record: k̂
  // [2·16], v [4·24], β and α [4 each], pre-conv q|k|v [2·2·16 + 4·24].
  const size_t record = (2 * 16 + 4 * 24 + 2 * 4 + (2 * 2 * 16 + 4 * 24)) * sizeof(float);
  EXPECT_GE(s.snapshot_bytes, 3 * 2 * 4 * record);
  EXPECT_LE(s.snapshot_bytes, 3 * 2 * 17 * record);  // the logs, capacity for the most rows a step has
  EXPECT_GT(s.kv_bytes_used, 0u);
  EXPECT_EQ(s.state_bytes_per_sequence_max, s.kv_bytes_used + s.recurrent_bytes + s.snapshot_bytes);
}

}  // namespace
}  // namespace nextn
