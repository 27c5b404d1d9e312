// speculative/step.h — one sequence's part of a speculative step, in two halves around
// the target's batched forward: the rows drafting hands to the target ([last, d1..dk]),
// and verification, which turns the scored rows into the tokens the step emits. The
// batch's step as a whole (planning, drafting, the forward, rollback, commits, counts)
// is speculative/speculator.h.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"
#include "speculative/drafter.h"
#include "state/sequence_state.h"
#include "speculative/verifier.h"

namespace nextn {

// The most drafts one step may carry, whatever a request asks for (the server's
// num_draft_tokens range stops here too): beyond it acceptance of the last positions
// is negligible and the verify forward only grows.
constexpr int kMaxDraftsPerStep = 16;
// Rows of one decode step at most: `last` plus the drafts.
constexpr int kMaxRowsPerStep = kMaxDraftsPerStep + 1;
// A verify must fit one forward of a sliding-window model (its rings' slack).
static_assert(kMaxRowsPerStep <= kMinWindowSlackRows, "verify rows exceed the sliding-window ring slack");

// What drafting hands to verification.
struct DraftedRows {
  std::vector<int32_t> rows;      // the target's input rows: [last, d1..dk]
  std::vector<Distribution> q;    // q[i]: the distribution d(i+1) was drawn from; empty: one-hot drafts
  double draft_seconds = 0;       // this sequence's share of the batch's drafting time
  const char* drafter = nullptr;  // the chained drafter's part that proposed them (DraftProposal)
  int num_drafts() const { return int(rows.size()) - 1; }
  std::span<const int32_t> drafts() const { return std::span<const int32_t>(rows).subspan(1); }
};

// The tokens one step emits.
struct StepTokens {
  int accepted = 0;              // drafts accepted: a prefix of the drafts
  std::vector<int32_t> tokens;   // d1..d_accepted, then the target's own next token
};

// Verifies the drafts against the target's scores for the rows.
// Requires: `logits` holds rows.rows.size() == num_drafts + 1 rows of `vocab` scores,
//   row j being the target's scores after it saw [last, d1..dj].
// Returns: at least one token (accepted + 1): the accepted drafts, then the target's
//   correction (at the first rejected draft) or bonus token (after the last draft).
// Equivalent to sampling the rows one by one with `sampler` and stopping at the first
//   sampled token that differs from the draft: the same tokens when greedy, the same
//   distribution when sampling (rules.synthetic_accept aside). Leaves the sampler as if
//   it had done so: every returned token accepted, in order.
StepTokens verify_rows(const DraftedRows& rows, const float* logits, int vocab, Sampler& sampler,
                       const VerifyRules& rules);

}  // namespace nextn
