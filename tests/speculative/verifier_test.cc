// tests/speculative/verifier_test.cc — the verifier with synthetic p/q: greedy prefix
// rules, exactness of lossless speculative sampling (the emitted tokens follow p,
// checked with chi-square), detection of a broken rule, synthetic acceptance.
#include <gtest/gtest.h>

#include <map>

#include "chi_square.h"
#include "speculative/verifier.h"
#include "wrong_rejection_rule.h"

namespace nextn {
namespace {

Distribution make_dist(const std::vector<float>& probs) {
  Distribution d;
  d.probs = probs;
  for (size_t i = 0; i < probs.size(); ++i)
    if (probs[i] > 0) d.support.push_back(int32_t(i));
  return d;
}

TEST(VerifyGreedy, AcceptsMatchingPrefixThenCorrects) {
  Rng rng(1);
  std::vector<int32_t> target = {5, 6, 7, 8};  // target's choice per row
  auto tgt = [&](int row) { return target[size_t(row)]; };
  std::vector<int32_t> drafts = {5, 6, 9};
  VerifyOutcome o = verify_greedy(drafts, tgt, rng);
  EXPECT_EQ(o.accepted, 2);
  EXPECT_EQ(o.next, 7);  // correction
  drafts = {5, 6, 7};
  o = verify_greedy(drafts, tgt, rng);
  EXPECT_EQ(o.accepted, 3);
  EXPECT_EQ(o.next, 8);  // bonus
  drafts = {1};
  o = verify_greedy(drafts, tgt, rng);
  EXPECT_EQ(o.accepted, 0);
  EXPECT_EQ(o.next, 5);
  o = verify_greedy({}, tgt, rng);  // no drafts: plain decode
  EXPECT_EQ(o.accepted, 0);
  EXPECT_EQ(o.next, 5);
}

TEST(VerifyGreedy, RowsRequestedOnlyUpToTheFirstRejection) {
  Rng rng(1);
  std::vector<int> asked;
  auto tgt = [&](int row) {
    asked.push_back(row);
    return 3;
  };
  std::vector<int32_t> drafts = {3, 4, 3, 3};
  VerifyOutcome o = verify_greedy(drafts, tgt, rng);
  EXPECT_EQ(o.accepted, 1);
  EXPECT_EQ(asked, (std::vector<int>{0, 1}));
}

// Draws the first emitted token of speculative steps with one draft from q.
std::vector<double> first_token_histogram(const Distribution& p, const Distribution* q, bool broken, int trials,
                                          uint64_t seed, double* acceptance = nullptr) {
  Rng rng(seed);
  std::vector<double> counts(p.probs.size(), 0.0);
  int accepted = 0;
  for (int i = 0; i < trials; ++i) {
    int32_t d = q ? sample_from(*q, rng) : 2;
    std::vector<int32_t> drafts = {d};
    std::vector<Distribution> qs;
    if (q) qs.push_back(*q);
    VerifyRules rules;
    if (broken) rules.on_reject = testing::resample_from_target;
    VerifyOutcome o = verify_sampled(drafts, qs, [&](int) -> const Distribution& { return p; }, rng, rules);
    counts[size_t(o.accepted ? d : o.next)] += 1;
    accepted += o.accepted;
  }
  if (acceptance) *acceptance = double(accepted) / trials;
  return counts;
}

const std::vector<float> kP = {0.05f, 0.30f, 0.10f, 0.25f, 0.0f, 0.30f};
const std::vector<float> kQ = {0.40f, 0.05f, 0.30f, 0.05f, 0.15f, 0.05f};

TEST(VerifySampled, EmittedTokensFollowTheTarget) {
  Distribution p = make_dist(kP), q = make_dist(kQ);
  double acc = 0;
  auto counts = first_token_histogram(p, &q, false, 200000, 11, &acc);
  auto r = testing::goodness_of_fit(counts, std::vector<double>(kP.begin(), kP.end()));
  EXPECT_GT(r.p_value, 0.01) << "chi2 " << r.statistic << " dof " << r.dof;
  EXPECT_EQ(counts[4], 0.0);  // p = 0 there even though q proposes it
  // Acceptance probability is sum_x min(p, q) = 0.05+0.05+0.10+0.05+0+0.05 = 0.30
  EXPECT_NEAR(acc, 0.30, 0.01);
}

TEST(VerifySampled, BrokenResampleIsDetected) {
  Distribution p = make_dist(kP), q = make_dist(kQ);
  auto counts = first_token_histogram(p, &q, true, 200000, 11);
  auto r = testing::goodness_of_fit(counts, std::vector<double>(kP.begin(), kP.end()));
  EXPECT_LT(r.p_value, 1e-6) << "chi2 " << r.statistic;
}

TEST(VerifySampled, DeterministicDraftsFollowTheTarget) {
  // n-gram drafts: q is one-hot at the draft (token 2).
  Distribution p = make_dist(kP);
  double acc = 0;
  auto counts = first_token_histogram(p, nullptr, false, 200000, 5, &acc);
  auto r = testing::goodness_of_fit(counts, std::vector<double>(kP.begin(), kP.end()));
  EXPECT_GT(r.p_value, 0.01) << r.statistic;
  EXPECT_NEAR(acc, 0.10, 0.01);  // p(2)
}

TEST(VerifySampled, TwoDraftsJointDistribution) {
  // Rows: p0 for the first token, p1 for the second; the pair must follow p0 x p1.
  Distribution p0 = make_dist(kP), p1 = make_dist({0.5f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f}), pb = make_dist(kP);
  Distribution q0 = make_dist(kQ), q1 = make_dist({0.1f, 0.5f, 0.1f, 0.1f, 0.1f, 0.1f});
  Rng rng(9);
  std::vector<double> counts(36, 0.0), probs(36, 0.0);
  for (int i = 0; i < 36; ++i) probs[size_t(i)] = double(p0.probs[size_t(i / 6)]) * p1.probs[size_t(i % 6)];
  const int trials = 200000;
  for (int i = 0; i < trials; ++i) {
    std::vector<int32_t> drafts = {sample_from(q0, rng), sample_from(q1, rng)};
    std::vector<Distribution> qs = {q0, q1};
    const Distribution* rows[] = {&p0, &p1, &pb};
    VerifyOutcome o = verify_sampled(drafts, qs, [&](int r) -> const Distribution& { return *rows[r]; }, rng);
    int32_t first = o.accepted >= 1 ? drafts[0] : o.next;
    int32_t second;
    if (o.accepted >= 2) second = drafts[1];
    else if (o.accepted == 1) second = o.next;
    else second = sample_from(p1, rng);  // the next step would draw from p1
    counts[size_t(first * 6 + second)] += 1;
  }
  auto r = testing::goodness_of_fit(counts, probs);
  EXPECT_GT(r.p_value, 0.01) << r.statistic;
}

TEST(VerifySampled, SyntheticAcceptanceRate) {
  Distribution p = make_dist(kP), q = make_dist(kQ);
  Rng rng(4);
  VerifyRules rules;
  rules.synthetic_accept = 0.6;
  int accepted = 0, total = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<int32_t> drafts = {4, 4, 4};  // p(4) = 0: never accepted by the real rule
    std::vector<Distribution> qs = {q, q, q};
    VerifyOutcome o = verify_sampled(drafts, qs, [&](int) -> const Distribution& { return p; }, rng, rules);
    accepted += o.accepted;
    total += 3;
  }
  // E[accepted] per step = .6 + .36 + .216 = 1.176 of 3
  EXPECT_NEAR(double(accepted) / total, 1.176 / 3, 0.01);
  rules.synthetic_accept = 1.0;
  std::vector<int32_t> drafts = {4, 4};
  VerifyOutcome o = verify_greedy(drafts, [](int) { return 1; }, rng, rules);
  EXPECT_EQ(o.accepted, 2);
  EXPECT_EQ(o.next, 1);
}

}  // namespace
}  // namespace nextn
