// speculative/verifier.cc — greedy, lossless p/q and synthetic acceptance of drafts.
#include "speculative/verifier.h"

#include <algorithm>

namespace nextn {

VerifyOutcome verify_greedy(std::span<const int32_t> drafts, const TargetToken& target, Rng& rng,
                            const VerifyRules& rules) {
  VerifyOutcome out;
  for (size_t j = 0; j < drafts.size(); ++j) {
    int32_t t = target(int(j));
    bool ok = rules.synthetic_accept >= 0 ? rng.uniform() < rules.synthetic_accept : t == drafts[j];
    if (!ok) {
      out.next = t;
      return out;
    }
    out.accepted += 1;
  }
  out.next = target(int(drafts.size()));
  return out;
}

int32_t draw_from_residual(const Distribution& p, const Distribution* q, int32_t draft, Rng& rng,
                           Distribution& scratch) {
  // residual r = max(0, p - q) over p's support (zero elsewhere since p = 0 there)
  size_t vocab = p.probs.size();
  if (scratch.probs.size() != vocab) scratch.probs.assign(vocab, 0.0f);
  for (int32_t t : scratch.support) scratch.probs[size_t(t)] = 0.0f;
  scratch.support.clear();
  double mass = 0.0;
  for (int32_t t : p.support) {
    float r = p.probs[size_t(t)] - (q ? q->p(t) : (t == draft ? 1.0f : 0.0f));
    if (r > 0.0f) {
      scratch.probs[size_t(t)] = r;
      scratch.support.push_back(t);
      mass += r;
    }
  }
  if (mass <= 0.0) return sample_from(p, rng);  // p == q up to rounding: any draw from p is exact
  return sample_from(scratch, rng);
}

bool accept_or_resample(const Distribution& p, const Distribution* q, int32_t draft, Rng& rng,
                        int32_t* replacement, Distribution& scratch, RejectionRule on_reject) {
  float pd = p.p(draft);
  float qd = q ? q->p(draft) : 1.0f;
  // accept with probability min(1, p/q); qd == 0 cannot happen for a drawn draft,
  // but treat it as "always accept if p > 0".
  double u = rng.uniform();
  if (pd > 0.0f && (qd <= 0.0f || u * double(qd) < double(pd))) return true;
  *replacement = (on_reject ? on_reject : draw_from_residual)(p, q, draft, rng, scratch);
  return false;
}

VerifyOutcome verify_sampled(std::span<const int32_t> drafts, std::span<const Distribution> q,
                             const TargetDistribution& target, Rng& rng, const VerifyRules& rules) {
  VerifyOutcome out;
  Distribution scratch;
  for (size_t j = 0; j < drafts.size(); ++j) {
    const Distribution& p = target(int(j));
    if (rules.synthetic_accept >= 0) {
      if (rng.uniform() < rules.synthetic_accept) {
        out.accepted += 1;
        continue;
      }
      out.next = sample_from(p, rng);
      return out;
    }
    int32_t replacement = 0;
    const Distribution* qj = q.empty() ? nullptr : &q[j];
    if (!accept_or_resample(p, qj, drafts[j], rng, &replacement, scratch, rules.on_reject)) {
      out.next = replacement;
      return out;
    }
    out.accepted += 1;
  }
  out.next = sample_from(target(int(drafts.size())), rng);
  return out;
}

}  // namespace nextn
