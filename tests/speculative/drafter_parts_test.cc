// tests/speculative/drafter_parts_test.cc — n-gram prompt lookup, statistics text,
// the verify cost model and the adaptive depth policy.
#include <gtest/gtest.h>

#include "model/model.h"
#include "speculative/adaptive_depth.h"
#include "speculative/counters.h"
#include "speculative/drafter.h"

namespace nextn {
namespace {

// The n-gram drafter never looks at the model; drafters are made from one all the same.
class NoModel final : public Model {
 public:
  const ModelConfig& config() const override { return config_; }
  const std::string& dir() const override { return dir_; }
  size_t weight_bytes() const override { return 0; }
  std::unique_ptr<SequenceState> new_state(int, const KvOptions&) const override { return nullptr; }
  void forward(std::span<SequenceRows>, ForwardResult&) override {}
  MtpHead* mtp_head() override { return nullptr; }

 private:
  ModelConfig config_;
  std::string dir_;
};

std::unique_ptr<DraftSession> ngram_session() {
  static NoModel model;
  return make_ngram_drafter(model, SpeculativeOptions{})->new_session(1024, KvOptions{});
}

TEST(Ngram, ProposesTheContinuationOfTheLatestMatch) {
  auto s = ngram_session();
  SamplingParams sp;
  Sampler sampler(sp, 100, {});
  std::vector<int32_t> seq = {1, 2, 3, 4, 5, 9, 9, 1, 2, 3, 7, 8, 1, 2};
  s->commit(0, seq, nullptr);
  DraftProposal out;
  s->propose(3, 3, sampler, out);  // suffix "1 2 3": latest occurrence is followed by 7 8 1
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{7, 8, 1}));
  EXPECT_TRUE(out.q.empty());
  s->propose(42, 3, sampler, out);  // never seen
  EXPECT_TRUE(out.tokens.empty());
  // Rollback forgets the later occurrence: "1 2 3" -> "4 5 9".
  s->rollback(9);
  s->propose(3, 3, sampler, out);
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{4, 5, 9}));
  // A repeating tail drafts up to the pending token.
  auto r = ngram_session();
  std::vector<int32_t> rep = {5, 6, 5, 6, 5};
  r->commit(0, rep, nullptr);
  r->propose(6, 4, sampler, out);
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{5, 6}));
}

TEST(SpeculativeCounters, RecordAndFormat) {
  SpeculativeCounters c;
  c.record(3, 2);
  c.record(3, 0);
  c.record(2, 2);
  EXPECT_EQ(c.drafts, 3u);
  EXPECT_EQ(c.draft_tokens, 8u);
  EXPECT_EQ(c.accepted, 4u);
  EXPECT_EQ(c.accepted_per_pos, (std::vector<uint64_t>{2, 2, 0}));
  EXPECT_EQ(c.drafted_per_pos, (std::vector<uint64_t>{3, 3, 2}));
  EXPECT_DOUBLE_EQ(c.mean_accepted_length(), 1.0 + 4.0 / 3.0);
  EXPECT_EQ(format_acceptance(4, 8), "4/8 (50.0%)");
  EXPECT_EQ(format_acceptance(0, 0), "0/0 (0.0%)");
}

TEST(VerifyCostModel, InterpolatesAndExtrapolates) {
  VerifyCostModel m(16);
  m.record(1, 10.0);
  m.record(3, 14.0);
  EXPECT_DOUBLE_EQ(m.cost(1), 10.0);
  EXPECT_DOUBLE_EQ(m.cost(2), 12.0);
  EXPECT_DOUBLE_EQ(m.cost(5), 18.0);  // slope 2 per row
}

TEST(AdaptiveDepth, DeepWhenAcceptedAndCheapShallowWhenRejected) {
  VerifyCostModel cheap(16);
  for (int r = 1; r <= 9; ++r) cheap.record(r, 1.0 + 0.1 * r);
  AdaptiveDepth none(8);
  for (int i = 0; i < 200; ++i) {
    int k = none.choose(cheap);
    none.record(k, 0, 0.2 * k);
  }
  // Everything rejected so far: no drafting (apart from periodic probes).
  int zero = 0;
  for (int i = 0; i < 64; ++i) zero += none.choose(cheap) == 0;
  EXPECT_GE(zero, 50);

  AdaptiveDepth all(8);
  for (int i = 0; i < 200; ++i) {
    int k = all.choose(cheap);
    all.record(k, k, 0.001 * k);
  }
  EXPECT_EQ(all.choose(cheap), 8);

  // Verify cost linear in rows (compute-bound): drafting cannot pay off.
  VerifyCostModel linear(16);
  for (int r = 1; r <= 9; ++r) linear.record(r, double(r));
  AdaptiveDepth lin(8);
  for (int i = 0; i < 100; ++i) {
    int k = lin.choose(linear);
    lin.record(k, std::min(k, 1), 0.0);
  }
  int chosen_zero = 0;
  for (int i = 0; i < 16; ++i) chosen_zero += lin.choose(linear) == 0;
  EXPECT_GE(chosen_zero, 12);
}

}  // namespace
}  // namespace nextn
