// sampling/sampler.cc — penalties, temperature, top-k/top-p/min-p, seeded sampling.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/kernels.h"

namespace nextn {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Clears the previous contents cheaply (only the old support) and sizes `probs`.
void reset_distribution(Distribution& d, int vocab) {
  if (int(d.probs.size()) != vocab) {
    d.probs.assign(size_t(vocab), 0.0f);
  } else {
    for (int32_t t : d.support) d.probs[size_t(t)] = 0.0f;
  }
  d.support.clear();
}
}  // namespace

void Rng::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

uint64_t Rng::next() {
  uint64_t result = rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

void Distribution::set_one_hot(int vocab, int32_t token) {
  reset_distribution(*this, vocab);
  probs[size_t(token)] = 1.0f;
  support.push_back(token);
}

int32_t sample_from(const Distribution& dist, Rng& rng) {
  double total = 0.0;
  for (int32_t t : dist.support) total += dist.probs[size_t(t)];
  double u = rng.uniform() * total;
  double acc = 0.0;
  int32_t last = dist.support.empty() ? 0 : dist.support.back();
  for (int32_t t : dist.support) {
    float p = dist.probs[size_t(t)];
    if (p <= 0.0f) continue;
    acc += p;
    last = t;
    if (u < acc) return t;
  }
  return last;  // rounding: the last token with mass
}

TokenLogprobs compute_logprobs(const float* logits, int vocab, int32_t token, int top_n) {
  float mx = logits[argmax(logits, vocab)];
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(double(logits[i] - mx));
  float log_z = mx + float(std::log(sum));
  TokenLogprobs out;
  out.logprob = logits[token] - log_z;
  top_n = std::min(top_n, vocab);
  if (top_n > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + top_n, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int i = 0; i < top_n; ++i) out.top.emplace_back(ids[size_t(i)], logits[ids[size_t(i)]] - log_z);
  }
  return out;
}

void processed_distribution(float* logits, int vocab, const SamplingParams& params, Distribution& out,
                            std::vector<int32_t>& order) {
  if (params.temperature <= 0.0f) {
    out.set_one_hot(vocab, argmax(logits, vocab));
    return;
  }
  if (params.temperature != 1.0f) {
    float inv_t = 1.0f / params.temperature;
    for (int i = 0; i < vocab; ++i) logits[i] *= inv_t;
  }
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  order.resize(size_t(vocab));
  std::iota(order.begin(), order.end(), 0);
  if (params.top_k > 0 && params.top_k < vocab) {
    std::nth_element(order.begin(), order.begin() + params.top_k, order.end(), by_logit);
    order.resize(size_t(params.top_k));
  }
  float mx = -INFINITY;
  for (int32_t t : order) mx = std::max(mx, logits[t]);
  double sum = 0.0;
  for (int32_t t : order) {
    float e = std::exp(logits[t] - mx);
    logits[t] = e;
    sum += e;
  }
  for (int32_t t : order) logits[t] = float(logits[t] / sum);  // logits now holds probabilities
  auto by_prob = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };

  if (params.top_p < 1.0f && params.top_p > 0.0f) {
    // Sort only as much of the candidate list as the nucleus needs.
    size_t m = std::min<size_t>(order.size(), 256);
    while (true) {
      std::partial_sort(order.begin(), order.begin() + long(m), order.end(), by_prob);
      double cum = 0.0;
      size_t cut = 0;
      for (; cut < m; ++cut) {
        cum += logits[order[cut]];
        if (cum >= params.top_p) break;
      }
      if (cut < m) {
        order.resize(cut + 1);
        break;
      }
      if (m == order.size()) break;
      m = std::min(order.size(), m * 4);
    }
  }
  if (params.min_p > 0.0f && !order.empty()) {
    float pmax = 0.0f;
    for (int32_t t : order) pmax = std::max(pmax, logits[t]);
    float floor = params.min_p * pmax;
    order.erase(std::remove_if(order.begin(), order.end(), [&](int32_t t) { return logits[t] < floor; }),
                order.end());
  }
  double kept = 0.0;
  for (int32_t t : order) kept += logits[t];
  reset_distribution(out, vocab);
  std::sort(order.begin(), order.end());  // a fixed order: sampling depends only on the distribution
  for (int32_t t : order) {
    out.probs[size_t(t)] = float(logits[t] / kept);
    out.support.push_back(t);
  }
}

Sampler::Sampler(const SamplingParams& params, int vocab, std::span<const int32_t> prompt)
    : params_(params), vocab_(vocab) {
  uint64_t seed = params.has_seed ? params.seed : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  rng_.reseed(seed);
  if (params_.repetition_penalty != 1.0f) prompt_tokens_.insert(prompt.begin(), prompt.end());
}

void Sampler::accept(int32_t token) {
  output_counts_[token] += 1;
  if (constraint_) constraint_->accept(token);
}

void Sampler::penalized(const float* logits) {
  work_.assign(logits, logits + vocab_);
  float rp = params_.repetition_penalty;
  auto repeat = [&](int32_t t) {
    float& l = work_[size_t(t)];
    l = l > 0.0f ? l / rp : l * rp;
  };
  if (rp != 1.0f) {
    for (int32_t t : prompt_tokens_)
      if (t >= 0 && t < vocab_) repeat(t);
    for (auto& [t, c] : output_counts_)
      if (t >= 0 && t < vocab_ && !prompt_tokens_.count(t)) repeat(t);
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    for (auto& [t, c] : output_counts_)
      if (t >= 0 && t < vocab_) work_[size_t(t)] -= params_.presence_penalty + params_.frequency_penalty * float(c);
  }
  for (auto [t, bias] : params_.logit_bias)
    if (t >= 0 && t < vocab_) work_[size_t(t)] = bias <= -100.0f ? -INFINITY : work_[size_t(t)] + bias;
}

void Sampler::distribution(const float* logits, Distribution& out) {
  penalized(logits);
  if (constraint_ && !constraint_->mask(work_.data(), vocab_)) {
    // Nothing is allowed (the constraint is complete): the engine ends the sequence
    // before such a token is emitted; any valid distribution will do.
    out.set_one_hot(vocab_, argmax(logits, vocab_));
    return;
  }
  processed_distribution(work_.data(), vocab_, params_, out, order_);
}

int32_t Sampler::argmax_token(const float* logits) {
  bool penalties = params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                   params_.frequency_penalty != 0.0f || !params_.logit_bias.empty();
  if (!penalties && !constraint_) return argmax(logits, vocab_);
  penalized(logits);
  if (constraint_) constraint_->mask(work_.data(), vocab_);
  return argmax(work_.data(), vocab_);
}

int32_t Sampler::sample(const float* logits) {
  if (greedy()) return argmax_token(logits);
  distribution(logits, scratch_);
  return sample_from(scratch_, rng_);
}

}  // namespace nextn
