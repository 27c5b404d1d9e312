// tests/sampling/sampler_test.cc — processed distributions against hand-computed
// references, penalties, seeded reproducibility and sampling frequencies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "../speculative/chi_square.h"
#include "sampling/sampler.h"

namespace nextn {
namespace {

std::vector<double> softmax_ref(const std::vector<float>& logits, double t) {
  std::vector<double> p(logits.size());
  double mx = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp((logits[i] - mx) / t);
  for (auto& v : p) v /= z;
  return p;
}

Distribution process(std::vector<float> logits, const SamplingParams& sp) {
  Sampler s(sp, int(logits.size()), {});
  Distribution d;
  s.distribution(logits.data(), d);
  return d;
}

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.5f, 2.9f, 0.0f, -3.0f};

TEST(Sampler, GreedyIsArgmaxAndOneHot) {
  SamplingParams sp;  // temperature 0
  Sampler s(sp, 8, {});
  EXPECT_TRUE(s.greedy());
  EXPECT_EQ(s.sample(kLogits.data()), 1);
  Distribution d = process(kLogits, sp);
  ASSERT_EQ(d.support.size(), 1u);
  EXPECT_EQ(d.support[0], 1);
  EXPECT_FLOAT_EQ(d.p(1), 1.0f);
}

TEST(Sampler, TemperatureOnlyIsSoftmax) {
  SamplingParams sp;
  sp.temperature = 0.7f;
  Distribution d = process(kLogits, sp);
  auto ref = softmax_ref(kLogits, 0.7);
  EXPECT_EQ(d.support.size(), kLogits.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(d.p(int32_t(i)), ref[i], 1e-6);
}

TEST(Sampler, TopKTopPMinP) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 3;  // tokens 1, 5, 2
  Distribution d = process(kLogits, sp);
  auto ref = softmax_ref(kLogits, 1.0);
  double z = ref[1] + ref[5] + ref[2];
  EXPECT_EQ(d.support.size(), 3u);
  EXPECT_NEAR(d.p(1), ref[1] / z, 1e-6);
  EXPECT_NEAR(d.p(5), ref[5] / z, 1e-6);
  EXPECT_NEAR(d.p(2), ref[2] / z, 1e-6);
  EXPECT_EQ(d.p(0), 0.0f);

  // top-p: smallest prefix (by probability) whose mass reaches p.
  sp.top_k = 0;
  sp.top_p = float((ref[1] + ref[5]) / 1.0 + 1e-4);  // needs a third token
  d = process(kLogits, sp);
  EXPECT_EQ(d.support.size(), 3u);
  sp.top_p = float(ref[1] + ref[5] - 1e-4);  // two tokens suffice
  d = process(kLogits, sp);
  EXPECT_EQ(d.support.size(), 2u);
  EXPECT_NEAR(d.p(1), ref[1] / (ref[1] + ref[5]), 1e-6);

  // min-p: drop tokens below min_p * max prob.
  sp.top_p = 1.0f;
  sp.min_p = 0.5f;
  d = process(kLogits, sp);
  std::vector<int32_t> expect;
  for (int i = 0; i < 8; ++i)
    if (ref[size_t(i)] >= 0.5 * ref[1]) expect.push_back(i);
  EXPECT_EQ(d.support, expect);
  double kept = 0;
  for (int32_t t : expect) kept += ref[size_t(t)];
  for (int32_t t : expect) EXPECT_NEAR(d.p(t), ref[size_t(t)] / kept, 1e-6);
}

TEST(Sampler, TopPOnLargeVocabularyMatchesFullSort) {
  std::vector<float> logits(5000);
  Rng rng(3);
  for (auto& l : logits) l = float(rng.uniform() * 6.0);
  SamplingParams sp;
  sp.temperature = 0.9f;
  sp.top_p = 0.95f;  // needs far more than the first 256 candidates
  Distribution d = process(logits, sp);
  auto ref = softmax_ref(logits, 0.9);
  std::vector<int> order(ref.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ref[size_t(a)] > ref[size_t(b)]; });
  double cum = 0;
  size_t n = 0;
  while (cum < 0.95) cum += ref[size_t(order[n++])];
  EXPECT_EQ(d.support.size(), n);
  EXPECT_GT(n, 256u);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(d.p(order[i]), ref[size_t(order[i])] / cum, 1e-6);
}

TEST(Sampler, Penalties) {
  std::vector<int32_t> prompt = {1};
  SamplingParams sp;
  sp.repetition_penalty = 2.0f;  // token 1 (logit 3) -> 1.5: token 5 (2.9) wins
  Sampler s(sp, 8, prompt);
  EXPECT_EQ(s.argmax_token(kLogits.data()), 5);
  s.accept(5);  // now 5 -> 1.45; 2 (2.5) wins
  EXPECT_EQ(s.argmax_token(kLogits.data()), 2);

  SamplingParams fp;
  fp.frequency_penalty = 0.3f;
  fp.presence_penalty = 0.0f;
  Sampler f(fp, 8, prompt);  // prompt tokens are not penalized by frequency
  EXPECT_EQ(f.argmax_token(kLogits.data()), 1);
  f.accept(1);  // 3.0 - 0.3 = 2.7 < 2.9
  EXPECT_EQ(f.argmax_token(kLogits.data()), 5);
  SamplingParams pp;
  pp.presence_penalty = 0.05f;
  pp.temperature = 1.0f;
  Sampler p(pp, 8, prompt);
  p.accept(1);
  p.accept(1);
  Distribution d;
  p.distribution(kLogits.data(), d);
  std::vector<float> adjusted = kLogits;
  adjusted[1] -= 0.05f;
  auto ref = softmax_ref(adjusted, 1.0);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(d.p(i), ref[size_t(i)], 1e-6);
}

// logit_bias: added before everything else; -100 bans the token, even from greedy.
TEST(Sampler, LogitBias) {
  SamplingParams bp;
  bp.logit_bias = {{1, -100.0f}};  // the argmax, banned: 5 (2.9) wins
  Sampler b(bp, 8, {});
  EXPECT_EQ(b.argmax_token(kLogits.data()), 5);
  bp.logit_bias = {{1, -0.2f}, {2, 0.45f}};  // 2.8 and 2.95: 2 wins
  Sampler c(bp, 8, {});
  EXPECT_EQ(c.argmax_token(kLogits.data()), 2);
  bp.temperature = 1.0f;
  bp.logit_bias = {{1, -100.0f}, {3, 1.0f}};
  Sampler d(bp, 8, {});
  Distribution dist;
  d.distribution(kLogits.data(), dist);
  EXPECT_EQ(dist.probs[1], 0.0f);
  std::vector<float> adjusted = kLogits;
  adjusted[1] = -INFINITY;
  adjusted[3] += 1.0f;
  double z = 0;
  for (float l : adjusted) z += std::exp(double(l));
  for (int t = 0; t < 8; ++t) EXPECT_NEAR(dist.probs[size_t(t)], std::exp(double(adjusted[size_t(t)])) / z, 1e-6);
}

TEST(Sampler, SameSeedSameOutput) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 42;
  sp.has_seed = true;
  Sampler a(sp, 8, {}), b(sp, 8, {});
  sp.seed = 43;
  Sampler c(sp, 8, {});
  std::vector<int32_t> ra, rb, rc;
  for (int i = 0; i < 200; ++i) {
    ra.push_back(a.sample(kLogits.data()));
    rb.push_back(b.sample(kLogits.data()));
    rc.push_back(c.sample(kLogits.data()));
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(Sampler, FrequenciesFollowTheDistribution) {
  SamplingParams sp;
  sp.temperature = 1.3f;
  sp.top_k = 6;
  Distribution d = process(kLogits, sp);
  Rng rng(7);
  std::vector<double> counts(8, 0.0), probs(8, 0.0);
  for (int i = 0; i < 100000; ++i) counts[size_t(sample_from(d, rng))] += 1;
  for (int i = 0; i < 8; ++i) probs[size_t(i)] = d.p(i);
  auto r = testing::goodness_of_fit(counts, probs);
  EXPECT_GT(r.p_value, 0.01) << r.statistic;
  EXPECT_EQ(counts[3] + counts[7], 0.0);  // outside top-k
}

TEST(Sampler, Logprobs) {
  auto lp = compute_logprobs(kLogits.data(), 8, 2, 3);
  auto ref = softmax_ref(kLogits, 1.0);
  EXPECT_NEAR(lp.logprob, std::log(ref[2]), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 5);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[1].second, std::log(ref[5]), 1e-5);
}

TEST(ChiSquare, PValues) {
  // chi2 with 1 dof at 3.841 -> p = 0.05; 10 dof at 23.21 -> 0.01
  EXPECT_NEAR(testing::gamma_q(0.5, 3.841 / 2), 0.05, 1e-3);
  EXPECT_NEAR(testing::gamma_q(5.0, 23.209 / 2), 0.01, 1e-4);
  EXPECT_NEAR(testing::gamma_q(50.0, 50.0), 0.4812, 1e-3);
}

}  // namespace
}  // namespace nextn
