// tests/speculative/drafter_parts_test.cc — n-gram prompt lookup, statistics text,
// the cost models and the depth planner (on fake cost tables: deterministic).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/model.h"
#include "speculative/cost_model.h"
#include "speculative/depth_planner.h"
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
  void capture_streams(std::vector<int> streams) override { streams_ = std::move(streams); }
  const std::vector<int>& captured_streams() const override { return streams_; }
  MtpHead* mtp_head() override { return nullptr; }

 private:
  ModelConfig config_;
  std::string dir_;
  std::vector<int> streams_;
};

Drafter& ngram_drafter() {
  static NoModel model;
  static std::unique_ptr<Drafter> drafter = make_ngram_drafter(model, SpeculativeOptions{});
  return *drafter;
}

std::unique_ptr<DraftSession> ngram_session() { return ngram_drafter().new_session(1024, KvOptions{}); }

// A batch of one.
struct OneSession {
  DraftSession* session;
  void propose(int32_t last, int k, Sampler& sampler, DraftProposal& out) {
    DraftJob job{session, last, k, &sampler, nullptr, &out};
    DraftPasses passes;
    ngram_drafter().propose(std::span<const DraftJob>(&job, 1), passes);
  }
};

TEST(Ngram, ProposesTheContinuationOfTheLatestMatch) {
  auto session = ngram_session();
  OneSession s{session.get()};
  SamplingParams sp;
  Sampler sampler(sp, 100, {});
  std::vector<int32_t> seq = {1, 2, 3, 4, 5, 9, 9, 1, 2, 3, 7, 8, 1, 2};
  session->commit(0, seq, TargetRows{});
  DraftProposal out;
  s.propose(3, 3, sampler, out);  // suffix "1 2 3": latest occurrence is followed by 7 8 1
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{7, 8, 1}));
  EXPECT_TRUE(out.q.empty());
  s.propose(42, 3, sampler, out);  // never seen
  EXPECT_TRUE(out.tokens.empty());
  // Rollback forgets the later occurrence: "1 2 3" -> "4 5 9".
  session->rollback(9);
  s.propose(3, 3, sampler, out);
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{4, 5, 9}));
  // A repeating tail drafts up to the pending token.
  auto repeating = ngram_session();
  OneSession r{repeating.get()};
  std::vector<int32_t> rep = {5, 6, 5, 6, 5};
  repeating->commit(0, rep, TargetRows{});
  r.propose(6, 4, sampler, out);
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

// Two samples of the same cost: the model drops the first of each row count.
void measure(VerifyCostModel& m, int rows, double seconds, double distinct_experts = -1.0) {
  m.record(rows, seconds, distinct_experts);
  m.record(rows, seconds, distinct_experts);
}

// A fake machine whose forward cost depends on the rows alone, however many sequences
// carry them (1..8).
void measure(ForwardCostModel& m, int rows, double seconds, double distinct_experts = -1.0) {
  for (int b = 1; b <= 8; ++b) {
    m.record(b, rows, seconds, distinct_experts);
    m.record(b, rows, seconds, distinct_experts);
  }
}

// The first forward of a size pays one-time allocations and is not taken as its cost;
// a later stall counts at most twice the estimate.
TEST(VerifyCostModel, FirstSampleDroppedAndStallsBounded) {
  VerifyCostModel m(16);
  m.record(1, 10.0);
  m.record(4, 120.0);  // first 4-row forward: allocations
  m.record(1, 10.0);
  m.record(4, 14.0);
  EXPECT_DOUBLE_EQ(m.cost(1), 10.0);
  EXPECT_DOUBLE_EQ(m.cost(4), 14.0);
  m.record(4, 140.0);  // a stall: counted as 28
  EXPECT_DOUBLE_EQ(m.cost(4), 0.8 * 14.0 + 0.2 * 28.0);
}

TEST(VerifyCostModel, InterpolatesAndExtrapolates) {
  VerifyCostModel m(16);
  measure(m, 1, 10.0);
  measure(m, 3, 14.0);
  EXPECT_DOUBLE_EQ(m.cost(1), 10.0);
  EXPECT_DOUBLE_EQ(m.cost(2), 12.0);
  EXPECT_DOUBLE_EQ(m.cost(5), 18.0);  // slope 2 per row
}

// Start-up measurements stand until steps measure the same size, scaled by how steps
// compare with them where both exist (the machine's speed drifts); their first step counts.
TEST(VerifyCostModel, CalibrationFollowsTheDrift) {
  VerifyCostModel m(16);
  m.calibrate(1, 10.0);
  m.calibrate(2, 12.0);
  m.calibrate(4, 16.0);
  EXPECT_DOUBLE_EQ(m.cost(2), 12.0);
  EXPECT_DOUBLE_EQ(m.cost(3), 14.0);
  m.record(1, 15.0);  // the machine is 1.5x slower now
  EXPECT_DOUBLE_EQ(m.cost(1), 15.0);
  EXPECT_DOUBLE_EQ(m.cost(2), 18.0);
  EXPECT_DOUBLE_EQ(m.cost(4), 24.0);
}

// A calibrated size's first step is no exception to the stall bound: a single stalled
// step of a size the steps seldom visit must not stand for its cost.
TEST(VerifyCostModel, FirstStepOfACalibratedSizeIsBounded) {
  VerifyCostModel m(16);
  m.calibrate(1, 10.0);
  m.calibrate(8, 20.0);
  m.record(1, 10.0);   // drift 1
  m.record(8, 150.0);  // stalled: the drift moves by at most 2x, the cost counts at most twice its estimate
  const double drift = 0.8 * 1.0 + 0.2 * 2.0;
  EXPECT_DOUBLE_EQ(m.cost(8), 0.8 * (20.0 * drift) + 0.2 * (2 * 20.0 * drift));
}

// Sequences cost apart from their rows: a batch size's own measurements where it has
// them, else the single-sequence curve plus the batch's per-sequence offset.
TEST(ForwardCostModel, BatchesAddTheirPerSequenceCost) {
  ForwardCostModel m(8, 64);
  for (int r = 1; r <= 4; ++r) m.calibrate(1, r, 10.0 + (r - 1));  // one sequence: 1 per extra row
  m.calibrate(4, 4, 20.0);                                        // four sequences, a row each: +7
  m.calibrate(4, 12, 30.0);
  EXPECT_DOUBLE_EQ(m.cost(1, 3), 12.0);
  EXPECT_DOUBLE_EQ(m.cost(4, 4), 20.0);
  EXPECT_DOUBLE_EQ(m.cost(4, 8), 25.0);                  // between its own measurements
  EXPECT_DOUBLE_EQ(m.cost(4, 16), 25.0 + (30.0 - 21.0));  // past them: the shape, offset as at 12
  // Two sequences, never measured: four's offset at 4 rows scaled to one extra sequence.
  EXPECT_DOUBLE_EQ(m.cost(2, 2), 11.0 + 7.0 / 3.0);
}

TEST(VerifyCostModel, MixtureOfExpertsFollowsDistinctExperts) {
  // top-8 of 256: one row runs 8 experts, two rows 15.75 (uniform routing: 256 (1 - (248/256)^2)).
  VerifyCostModel m(16);
  m.set_routing(256, 8);
  EXPECT_DOUBLE_EQ(m.work(1), 8.0);
  EXPECT_NEAR(m.work(2), 256.0 * (1 - std::pow(248.0 / 256.0, 2)), 1e-9);
  measure(m, 1, 10.0, 8.0);
  measure(m, 2, 16.0, 14.0);  // measured: rows of one text share experts (14 < 15.75)
  EXPECT_DOUBLE_EQ(m.work(2), 14.0);
  // Rows 4: the uniform count scaled by the measured ratio at 2 rows.
  const double w4 = 256.0 * (1 - std::pow(248.0 / 256.0, 4)) * 14.0 / (256.0 * (1 - std::pow(248.0 / 256.0, 2)));
  EXPECT_NEAR(m.work(4), w4, 1e-9);
  // Extrapolated at the measured cost per distinct expert, 6 / 6 = 1 per expert.
  EXPECT_NEAR(m.cost(4), 16.0 + (w4 - 14.0), 1e-9);
  // A dense model stays linear in rows.
  VerifyCostModel dense(16);
  measure(dense, 1, 10.0, 8.0);
  EXPECT_DOUBLE_EQ(dense.work(3), 3.0);
}

// One sequence through the planner and its probes, as the speculative step drives them:
// choose() plans and probes, record() feeds back the verified step and its draft passes.
class OneSequence {
 public:
  OneSequence(const ForwardCostModel& costs, int max_depth) : costs_(costs), acceptance_(max_depth), max_(max_depth) {}
  int choose() {
    const PlanSequence seq{&acceptance_, max_};
    const DepthPlanner planner(costs_, 1, draft_, 0.05 * costs_.cost(1, 1));
    const std::vector<int> depths = planner.plan(std::span<const PlanSequence>(&seq, 1), 0);
    return acceptance_.probe(depths[0], max_, planner.deeper_could_win(std::span<const PlanSequence>(&seq, 1), depths, 0, 0));
  }
  void record(int k, int accepted, double draft_seconds) {
    acceptance_.record(k, accepted);
    for (int d = 0; d < k; ++d) draft_.record(d, 1, draft_seconds / k);
  }

 private:
  const ForwardCostModel& costs_;
  DraftCostModel draft_;
  AcceptanceEstimate acceptance_;
  int max_;
};

TEST(DepthPlanner, MixtureOfExpertsNeverDraftsSlowerThanPlainDecode) {
  // Verify cost dominated by the experts (each distinct expert 1/8 of a decode row):
  // k drafts cost about as many rows as the experts they add.
  ForwardCostModel moe(8, 16);
  moe.set_routing(128, 8);
  VerifyCostModel uniform(16);  // the distinct experts of uniform routing
  uniform.set_routing(128, 8);
  for (int r = 1; r <= 9; ++r) measure(moe, r, 0.2 + 0.1 * uniform.work(r), uniform.work(r));
  auto rate = [&](int k, double a) {
    double expected = 1, chain = 1;
    for (int i = 0; i < k; ++i) expected += chain *= a;
    return expected / moe.cost(1, k + 1);
  };
  // At 0.3 drafting loses; at 0.9 k = 2 or 3 gains ~10 % (at 0.8 k = 1 would gain 3 %,
  // within the noise of the acceptance estimate).
  for (double accept : {0.3, 0.9}) {
    OneSequence d(moe, 8);
    std::mt19937 rng(7);
    std::bernoulli_distribution ok(accept);
    for (int i = 0; i < 400; ++i) {
      const int k = d.choose();
      int accepted = 0;
      while (accepted < k && ok(rng)) ++accepted;
      d.record(k, accepted, 0.0);
    }
    // The most frequent choice over one probe period (one of 8 steps probes a neighbour).
    std::map<int, int> votes;
    for (int i = 0; i < 8; ++i) ++votes[d.choose()];
    const int chosen = std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) {
                         return a.second < b.second;
                       })->first;
    // The choice is never slower than plain decode (k = 0) at the true acceptance.
    EXPECT_GE(rate(chosen, accept), rate(0, accept) * 0.98) << "acceptance " << accept << " k " << chosen;
    if (accept > 0.5) {
      EXPECT_GT(chosen, 0);
    }
  }
}

TEST(DepthPlanner, DeepWhenAcceptedAndCheapShallowWhenRejected) {
  ForwardCostModel cheap(8, 16);
  for (int r = 1; r <= 9; ++r) measure(cheap, r, 1.0 + 0.1 * r);
  OneSequence none(cheap, 8);
  for (int i = 0; i < 200; ++i) {
    int k = none.choose();
    none.record(k, 0, 0.2 * k);
  }
  // Everything rejected so far: no drafting (apart from periodic probes).
  int zero = 0;
  for (int i = 0; i < 64; ++i) zero += none.choose() == 0;
  EXPECT_GE(zero, 50);

  OneSequence all(cheap, 8);
  for (int i = 0; i < 200; ++i) {
    int k = all.choose();
    all.record(k, k, 0.001 * k);
  }
  EXPECT_EQ(all.choose(), 8);

  // Verify cost linear in rows (compute-bound): drafting cannot pay off.
  ForwardCostModel linear(8, 16);
  for (int r = 1; r <= 9; ++r) measure(linear, r, double(r));
  OneSequence lin(linear, 8);
  for (int i = 0; i < 100; ++i) {
    int k = lin.choose();
    lin.record(k, std::min(k, 1), 0.0);
  }
  int chosen_zero = 0;
  for (int i = 0; i < 16; ++i) chosen_zero += lin.choose() == 0;
  EXPECT_GE(chosen_zero, 12);
}

// Probes back off while the choice holds: a policy settled on k = 0 because drafting
// loses whatever the acceptance (each draft costs half a decode row) probes after 8, 32,
// then every 128 steps; one whose drafts are all rejected after 8, 16, 32, 64, then
// every 128; one that settles on drafting still probes its neighbours now and then.
TEST(DepthPlanner, ProbesBackOffWhileTheChoiceHolds) {
  auto probes = [](const ForwardCostModel& costs, int accept_upto, double draft_seconds, int steps) {
    OneSequence d(costs, 4);
    int n = 0;
    for (int i = 0; i < steps; ++i) {
      const int k = d.choose();
      n += k > 0;
      d.record(k, std::min(k, accept_upto), draft_seconds * k);
    }
    return n;
  };
  ForwardCostModel costly(8, 8);
  for (int r = 1; r <= 5; ++r) measure(costly, r, 1.0 + 0.6 * (r - 1));
  // Hopeless: 2 tokens for 0.5 + 1.6 at k = 1, and worse deeper. Two drafting steps
  // before the draft cost is measured (its first sample is dropped), then probes 8 and 32
  // steps apart, then every 128: 11 in 1024 steps.
  EXPECT_LE(probes(costly, 4, 0.5, 1024), 11);
  // Cheap drafts, none accepted: the prior (0.7) gives way after ~30 rejected steps, then
  // probes come after 16, 32, 64, then every 128 steps.
  ForwardCostModel cheap(8, 8);
  for (int r = 1; r <= 5; ++r) measure(cheap, r, 1.0 + 0.05 * (r - 1));
  const int rejected = probes(cheap, 0, 0.01, 1024) - probes(cheap, 0, 0.01, 128);
  EXPECT_GE(rejected, 5);
  EXPECT_LE(rejected, 9);
  // All accepted: k = 4 nearly always; the shallower probes are rare.
  OneSequence all(cheap, 4);
  int deepest = 0;
  for (int i = 0; i < 1024; ++i) {
    const int k = all.choose();
    deepest += k == 4;
    all.record(k, k, 0.01 * k);
  }
  EXPECT_GE(deepest, 1000);
}

// A fixed acceptance at every position (as many observations as the prior is worth
// nothing next to).
AcceptanceEstimate fixed_acceptance(double a, int max_depth = 8) {
  AcceptanceEstimate e(max_depth);
  std::mt19937 rng(11);
  for (int i = 0; i < 4000; ++i) {
    int accepted = 0;
    std::bernoulli_distribution ok(a);
    while (accepted < max_depth && ok(rng)) ++accepted;
    e.record(max_depth, accepted);
  }
  return e;
}

// A machine whose forward streams the weights (1.0) up to 8 rows and is compute-bound
// beyond (each further row 0.15): one sequence verifies deep drafts almost free; eight
// sequences already fill the arithmetic with their plain rows.
ForwardCostModel bandwidth_then_compute() {
  ForwardCostModel m(8, 64);
  for (int r = 1; r <= 64; ++r) measure(m, r, 1.0 + 0.01 * std::min(r, 8) + 0.15 * std::max(0, r - 8));
  return m;
}

TEST(DepthPlanner, DraftsDeepForOneClientAndLessOnceTheBatchIsComputeBound) {
  const ForwardCostModel forward = bandwidth_then_compute();
  DraftCostModel draft;
  for (int b = 1; b <= 8; ++b) {  // a draft pass streams the head once: 0.05 whatever b is
    draft.record(0, b, 0.05), draft.record(0, b, 0.05);
    draft.record(1, b, 0.05), draft.record(1, b, 0.05);
  }
  const AcceptanceEstimate accepted = fixed_acceptance(0.8);
  auto plan = [&](int clients) {
    const DepthPlanner planner(forward, clients, draft, 0.05);
    std::vector<PlanSequence> seqs(size_t(clients), PlanSequence{&accepted, 8});
    return planner.plan(seqs, 0);
  };
  const std::vector<int> one = plan(1);
  EXPECT_GE(one[0], 4);  // 9 rows cost 1.23 against 1.01: deep drafts pay
  const std::vector<int> eight = plan(8);
  int rows = 0;
  for (int k : eight) rows += k + 1;
  // Every extra row now costs 0.15 of a decode step: at 0.8 acceptance the first draft
  // still pays for some sequences (0.8 tokens for 0.15 + its share of a pass), deep ones do not.
  EXPECT_LE(rows, 8 * 3);
  // The planner's choice is never slower than plain decoding, and no worse than any
  // uniform depth.
  std::vector<PlanSequence> seqs(8, PlanSequence{&accepted, 8});
  const DepthPlanner planner(forward, 8, draft, 0.05);
  const double chosen = planner.rate(seqs, eight, 0);
  for (int k = 0; k <= 8; ++k) {
    std::vector<int> uniform(8, k);
    EXPECT_GE(chosen, planner.rate(seqs, uniform, 0) * (1 - 1e-12)) << "uniform k " << k;
  }
}

TEST(DepthPlanner, PlainDecodingWhenDraftingCannotPay) {
  ForwardCostModel linear(8, 64);  // compute-bound from the first row
  for (int r = 1; r <= 32; ++r) measure(linear, r, double(r));
  DraftCostModel draft;
  const AcceptanceEstimate accepted = fixed_acceptance(0.6);
  const DepthPlanner planner(linear, 4, draft, 0.05);
  std::vector<PlanSequence> seqs(4, PlanSequence{&accepted, 8});
  EXPECT_EQ(planner.plan(seqs, 0), std::vector<int>(4, 0));
}

TEST(DepthPlanner, EachSequenceGetsTheDepthItsAcceptancePays) {
  ForwardCostModel forward(8, 64);  // each row 5 % of a decode step
  for (int r = 1; r <= 40; ++r) measure(forward, r, 1.0 + 0.05 * r);
  DraftCostModel draft;
  const AcceptanceEstimate high = fixed_acceptance(0.95), low = fixed_acceptance(0.05);
  const DepthPlanner planner(forward, 4, draft, 0.02);
  std::vector<PlanSequence> seqs = {{&high, 8}, {&low, 8}, {&high, 2}, {&low, 0}};
  const std::vector<int> depths = planner.plan(seqs, 0);
  EXPECT_GE(depths[0], 3);  // accepted nearly always: deep
  EXPECT_EQ(depths[1], 0);  // rejected nearly always: a plain row
  EXPECT_EQ(depths[2], 2);  // as deep as its own bound allows
  EXPECT_EQ(depths[3], 0);  // not drafting
}

TEST(DepthPlanner, NearTheBestOfEveryCombination) {
  // Exhaustive search over every combination of depths for three sequences on random
  // cost tables: the planner's choice (uniform depths, then one sequence at a time) is
  // within 2 % of the best rate.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 40; ++trial) {
    ForwardCostModel forward(8, 32);
    double cost = 1.0;
    const double knee = 1 + 10 * unit(rng), before = 0.05 * unit(rng), after = 0.4 * unit(rng);
    for (int r = 1; r <= 16; ++r) {
      measure(forward, r, cost);
      cost += r < knee ? before : after;
    }
    DraftCostModel draft;
    for (int b = 1; b <= 3; ++b) {
      const double pass = 0.2 * unit(rng) * (1 + 0.3 * (b - 1));
      draft.record(0, b, pass), draft.record(0, b, pass);
      draft.record(1, b, pass * 0.7), draft.record(1, b, pass * 0.7);
    }
    const AcceptanceEstimate a0 = fixed_acceptance(unit(rng), 4), a1 = fixed_acceptance(unit(rng), 4),
                             a2 = fixed_acceptance(unit(rng), 4);
    std::vector<PlanSequence> seqs = {{&a0, 4}, {&a1, 4}, {&a2, 3}};
    const DepthPlanner planner(forward, 3, draft, 0.05);
    double best = 0;
    for (int i = 0; i <= 4; ++i)
      for (int j = 0; j <= 4; ++j)
        for (int k = 0; k <= 3; ++k) {
          std::vector<int> d = {i, j, k};
          best = std::max(best, planner.rate(seqs, d, 0));
        }
    const std::vector<int> chosen = planner.plan(seqs, 0);
    EXPECT_GE(planner.rate(seqs, chosen, 0), 0.98 * best) << "trial " << trial;
  }
}

TEST(DraftCostModel, InterpolatesBetweenBatchSizesAndSeparatesTheFirstPass) {
  DraftCostModel m;
  EXPECT_DOUBLE_EQ(m.cost(0, 3, 0.5), 0.5);  // nothing measured: the fallback
  m.record(0, 1, 9.0);                       // the first sample of a size is dropped
  m.record(0, 1, 2.0);
  m.record(0, 4, 3.0);
  m.record(0, 4, 3.5);
  EXPECT_DOUBLE_EQ(m.cost(0, 1, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(m.cost(0, 4, 0.5), 3.5);
  EXPECT_DOUBLE_EQ(m.cost(0, 2, 0.5), 2.5);                // interpolated
  EXPECT_DOUBLE_EQ(m.cost(0, 6, 0.5), 3.5 * (1 + 0.2));     // 10 % per extra sequence
  EXPECT_DOUBLE_EQ(m.cost(1, 2, 0.5), 2.5);  // later passes unmeasured: as the first
  m.record(1, 2, 1.0);
  m.record(1, 2, 1.0);
  EXPECT_DOUBLE_EQ(m.cost(5, 2, 0.25), 1.0);  // later passes apart
  EXPECT_DOUBLE_EQ(m.cost(0, 2, 0.25), 2.5);
}

TEST(AcceptanceEstimate, StartsFromThePooledRatesAndLearnsItsOwn) {
  AcceptanceEstimate pooled = fixed_acceptance(0.9, 4);
  AcceptanceEstimate mine(4);
  mine.start_from(pooled);
  EXPECT_NEAR(mine.acceptance(0), 0.9, 0.1);  // decayed counts: the last ~30 draws
  for (int i = 0; i < 30; ++i) mine.record(2, 0);  // this request's drafts are all rejected
  EXPECT_LT(mine.acceptance(0), 0.2);
  EXPECT_NEAR(mine.expected_tokens(0), 1.0, 1e-12);
}

}  // namespace
}  // namespace nextn
