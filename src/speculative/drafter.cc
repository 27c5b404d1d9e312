// speculative/drafter.cc — what drafters share: choosing a draft from a row of logits.
#include "speculative/drafter.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"

namespace nextn {

int32_t choose_draft(const float* logits, int vocab, Sampler& sampler, DraftProposal& out, std::vector<float>& work,
                     std::vector<int32_t>& order) {
  if (Constraint* c = sampler.constraint()) {
    // Structured output: the draft is chosen among the tokens the constraint allows after
    // the drafts so far (q is masked like the target's p), and moves the constraint on;
    // the speculative step rolls the drafts back (speculator.cc, keep_allowed_drafts).
    work.assign(logits, logits + vocab);
    int32_t token;
    // Nothing allowed, or nothing the drafter scores (a reduced draft vocabulary leaves
    // the rest at -inf): the raw argmax, a forbidden token the step drops.
    bool any = c->mask(work.data(), vocab) && *std::max_element(work.begin(), work.end()) > -INFINITY;
    if (!any) {
      token = argmax(logits, vocab);
      if (!sampler.greedy()) out.q.emplace_back().set_one_hot(vocab, token);
    } else if (sampler.greedy()) {
      token = argmax(work.data(), vocab);
    } else {
      out.q.emplace_back();
      processed_distribution(work.data(), vocab, sampler.params(), out.q.back(), order);
      token = sample_from(out.q.back(), sampler.rng());
    }
    c->accept(token);
    return token;
  }
  if (sampler.greedy()) return argmax(logits, vocab);
  work.assign(logits, logits + vocab);  // processed_distribution works in place
  out.q.emplace_back();
  processed_distribution(work.data(), vocab, sampler.params(), out.q.back(), order);
  return sample_from(out.q.back(), sampler.rng());
}

}  // namespace nextn
