// sampling/sampler.h — the processed next-token distribution and seeded sampling.
// One Sampler per request: it applies penalties (repetition over prompt and
// output, presence/frequency over output), temperature, top-k, top-p and min-p to a
// logits row, producing the Distribution that both plain sampling and the
// speculative verifier use. Temperature 0 means greedy (a one-hot distribution).
// With a Constraint (structured output, sampling/constraint.h) every distribution and
// greedy choice is over the allowed tokens only, and accept() moves the constraint on.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sampling/constraint.h"

namespace nextn {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  bool has_seed = false;
  // OpenAI's logit_bias: added to a token's logit after the repetition, presence and
  // frequency penalties and before temperature and truncation; -100 or less bans the
  // token (its logit becomes -infinity).
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// xoshiro256** seeded through splitmix64: same seed, same stream, on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1)

 private:
  uint64_t s_[4];
};

// A probability distribution over the vocabulary: dense `probs` (zero outside
// `support`), `support` lists the token ids with non-zero probability.
struct Distribution {
  std::vector<float> probs;
  std::vector<int32_t> support;
  float p(int32_t token) const { return probs[size_t(token)]; }
  void set_one_hot(int vocab, int32_t token);
};

// Draws a token from `dist` with one uniform number.
int32_t sample_from(const Distribution& dist, Rng& rng);

struct TokenLogprobs {
  float logprob = 0.0f;                               // of the chosen token
  std::vector<std::pair<int32_t, float>> top;         // best alternatives, descending
};
// log-softmax of the raw logits row: the chosen token's log-probability and the
// `top_n` most likely tokens.
TokenLogprobs compute_logprobs(const float* logits, int vocab, int32_t token, int top_n);

class Sampler {
 public:
  Sampler(const SamplingParams& params, int vocab, std::span<const int32_t> prompt);

  bool greedy() const { return params_.temperature <= 0.0f; }
  const SamplingParams& params() const { return params_; }
  int vocab() const { return vocab_; }
  Rng& rng() { return rng_; }

  // Processed distribution of a logits row given the tokens accepted so far.
  void distribution(const float* logits, Distribution& out);
  // Greedy choice after penalties.
  int32_t argmax_token(const float* logits);
  // Plain sampling: greedy at temperature 0, else a draw from distribution().
  int32_t sample(const float* logits);
  // Records an emitted token (penalties and the constraint see it from now on).
  void accept(int32_t token);

  // The sequence's constraint (null: none); the drafters mask their q with it too.
  void set_constraint(std::shared_ptr<Constraint> constraint) { constraint_ = std::move(constraint); }
  Constraint* constraint() const { return constraint_.get(); }

 private:
  void penalized(const float* logits);  // fills work_
  SamplingParams params_;
  int vocab_;
  Rng rng_;
  std::unordered_set<int32_t> prompt_tokens_;
  std::unordered_map<int32_t, int> output_counts_;
  std::vector<float> work_;
  std::vector<int32_t> order_;
  Distribution scratch_;
  std::shared_ptr<Constraint> constraint_;
};

// Applies temperature, top-k, top-p and min-p to already-penalized logits
// (modified in place), writing a normalized distribution. Exposed for tests and
// for drafters that need a q distribution without penalties.
void processed_distribution(float* logits, int vocab, const SamplingParams& params, Distribution& out,
                            std::vector<int32_t>& order_scratch);

}  // namespace nextn
