// speculative/drafter.cc — what drafters share: choosing a draft from a row of logits.
#include "speculative/drafter.h"

namespace nextn {

int32_t choose_draft(const float* logits, int vocab, Sampler& sampler, DraftProposal& out, std::vector<float>& work,
                     std::vector<int32_t>& order) {
  if (sampler.greedy()) return argmax(logits, vocab);
  work.assign(logits, logits + vocab);  // processed_distribution works in place
  out.q.emplace_back();
  processed_distribution(work.data(), vocab, sampler.params(), out.q.back(), order);
  return sample_from(out.q.back(), sampler.rng());
}

}  // namespace nextn
