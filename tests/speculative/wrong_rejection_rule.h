// tests/speculative/wrong_rejection_rule.h — a deliberately wrong rejection rule: a
// rejected draft is replaced by a draw from p itself instead of normalize(max(0, p - q)),
// which over-weights the tokens the drafter likes. The verifier and distribution tests
// plug it in (VerifyRules::on_reject, the Speculator's constructor) to show that
// they notice a rule that is not lossless.
#pragma once
#include "sampling/sampler.h"

namespace nextn::testing {

inline int32_t resample_from_target(const Distribution& p, const Distribution*, int32_t, Rng& rng, Distribution&) {
  return sample_from(p, rng);
}

}  // namespace nextn::testing
