// speculative/verifier.h — deciding which drafted tokens the target accepts.
// Greedy: accept while the target's choice equals the draft, then emit the target's
// own token (correction or bonus) — identical to non-speculative greedy decoding.
// Sampled: lossless speculative sampling (Leviathan et al. 2022, Chen et al. 2023):
// accept d with probability min(1, p(d)/q(d)); on rejection draw from
// normalize(max(0, p - q)); after all drafts, a bonus token from the last row.
// Synthetic (benchmarks only): accept each draft with a fixed probability.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sampling/sampler.h"
#include "speculative/options.h"

namespace nextn {

struct VerifyOutcome {
  int accepted = 0;    // drafts accepted (prefix length)
  int32_t next = 0;    // the target's token after them (correction or bonus)
};

// Target row j (0..k) as the verifier needs it. The verifier asks for rows in
// order and only after every draft before row j was accepted, so penalties may
// include those drafts.
using TargetToken = std::function<int32_t(int row)>;                  // greedy choice
using TargetDistribution = std::function<const Distribution&(int row)>;  // processed p

// Draws the token that replaces draft `draft`, rejected against the target's p and the
// drafter's q (null: q one-hot at the draft); scratch is working memory. The product
// always uses the lossless draw_from_residual; the tests pass a wrong rule to show that
// they would notice one.
using RejectionRule = int32_t (*)(const Distribution& p, const Distribution* q, int32_t draft, Rng& rng,
                                  Distribution& scratch);

struct VerifyRules {
  double synthetic_accept = -1.0;  // >= 0: accept each draft with this probability
  RejectionRule on_reject = nullptr;  // null: draw_from_residual (lossless)
};

VerifyOutcome verify_greedy(std::span<const int32_t> drafts, const TargetToken& target, Rng& rng,
                            const VerifyRules& rules = {});

// q: the distribution each draft was drawn from (size k), or empty when every
// draft was deterministic (q one-hot at the draft, e.g. n-gram or greedy drafts).
VerifyOutcome verify_sampled(std::span<const int32_t> drafts, std::span<const Distribution> q,
                             const TargetDistribution& target, Rng& rng, const VerifyRules& rules = {});

// The lossless replacement of a rejected draft: a draw from normalize(max(0, p - q))
// (q null: one-hot at draft); from p itself when p == q up to rounding.
int32_t draw_from_residual(const Distribution& p, const Distribution* q, int32_t draft, Rng& rng,
                           Distribution& scratch);

// One draft against p and q (nullptr: one-hot at draft). Returns true when
// accepted; otherwise *replacement is drawn by on_reject (null: draw_from_residual).
bool accept_or_resample(const Distribution& p, const Distribution* q, int32_t draft, Rng& rng,
                        int32_t* replacement, Distribution& scratch, RejectionRule on_reject = nullptr);

}  // namespace nextn
