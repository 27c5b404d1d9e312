// tests/speculative/step_test.cc — the speculative step's contract (speculative/step.h):
// rows == drafts + 1, at least one token, the accepted drafts then the target's token,
// and the same tokens as sampling the rows one by one (greedy, with a repetition penalty
// so the sampler's view of the accepted drafts matters).
#include <gtest/gtest.h>

#include <vector>

#include "speculative/step.h"

namespace nextn {
namespace {

constexpr int kVocab = 8;

// Logits rows whose argmax is `best[j]` in row j (score 5), with a runner-up at
// `second[j]` (score 4.9): a repetition penalty on best[j] flips the choice.
std::vector<float> rows_with_argmax(const std::vector<int32_t>& best, const std::vector<int32_t>& second) {
  std::vector<float> logits(best.size() * kVocab, 0.0f);
  for (size_t j = 0; j < best.size(); ++j) {
    logits[j * kVocab + size_t(best[j])] = 5.0f;
    logits[j * kVocab + size_t(second[j])] = 4.9f;
  }
  return logits;
}

DraftedRows drafted(int32_t last, std::vector<int32_t> drafts) {
  DraftedRows d;
  d.rows.push_back(last);
  d.rows.insert(d.rows.end(), drafts.begin(), drafts.end());
  return d;
}

// What sampling the rows one at a time would give: row j is sampled after the
// tokens before it were accepted; stop at the first token that differs from the draft.
std::vector<int32_t> one_by_one(const DraftedRows& d, const std::vector<float>& logits, Sampler& sampler) {
  std::vector<int32_t> out;
  for (int j = 0; j <= d.num_drafts(); ++j) {
    int32_t t = sampler.argmax_token(logits.data() + size_t(j) * kVocab);
    sampler.accept(t);
    out.push_back(t);
    if (j == d.num_drafts() || t != d.drafts()[size_t(j)]) break;
  }
  return out;
}

TEST(SpeculativeStep, NoDraftsIsOnePlainToken) {
  Sampler sampler(SamplingParams{}, kVocab, std::vector<int32_t>{1});
  auto logits = rows_with_argmax({3}, {4});
  StepTokens s = verify_rows(drafted(1, {}), logits.data(), kVocab, sampler, {});
  EXPECT_EQ(s.accepted, 0);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{3}));
}

TEST(SpeculativeStep, AcceptedPrefixThenTheTargetsToken) {
  Sampler sampler(SamplingParams{}, kVocab, std::vector<int32_t>{1});
  auto logits = rows_with_argmax({2, 3, 5, 6}, {0, 0, 0, 0});
  StepTokens all = verify_rows(drafted(1, {2, 3, 5}), logits.data(), kVocab, sampler, {});
  EXPECT_EQ(all.accepted, 3);
  EXPECT_EQ(all.tokens, (std::vector<int32_t>{2, 3, 5, 6}));  // bonus token from the last row
  Sampler again(SamplingParams{}, kVocab, std::vector<int32_t>{1});
  StepTokens cut = verify_rows(drafted(1, {2, 4, 5}), logits.data(), kVocab, again, {});
  EXPECT_EQ(cut.accepted, 1);
  EXPECT_EQ(cut.tokens, (std::vector<int32_t>{2, 3}));  // correction at the first rejected draft
}

TEST(SpeculativeStep, SameTokensAsSamplingRowByRow) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;  // row 1's best (2) was accepted in row 0: it drops to 4
  auto logits = rows_with_argmax({2, 2, 4}, {7, 4, 5});
  for (std::vector<int32_t> drafts : {std::vector<int32_t>{2, 4}, {2, 2}, {7, 4}}) {
    DraftedRows d = drafted(1, drafts);
    Sampler step_sampler(p, kVocab, std::vector<int32_t>{1});
    Sampler row_sampler(p, kVocab, std::vector<int32_t>{1});
    StepTokens s = verify_rows(d, logits.data(), kVocab, step_sampler, {});
    EXPECT_EQ(s.tokens, one_by_one(d, logits, row_sampler)) << drafts[0] << "," << drafts[1];
    EXPECT_EQ(int(s.tokens.size()), s.accepted + 1);
    // Both samplers saw the same tokens: the next row is chosen alike.
    EXPECT_EQ(step_sampler.argmax_token(logits.data()), row_sampler.argmax_token(logits.data()));
  }
}

}  // namespace
}  // namespace nextn
