// speculative/step.cc — see step.h.
#include "speculative/step.h"

#include "util/timer.h"

namespace nextn {

namespace {
// Structured output: the drafts the constraint allows, in order, up to the first one it
// forbids (n-gram drafts are not chosen under the constraint; MTP and draft-model drafts
// are, through choose_draft()). The constraint returns to `depth`, its state before the
// drafts: only verification's accepted tokens move it for good.
void keep_allowed_drafts(Constraint& c, int depth, DraftProposal& proposal) {
  c.rollback(c.depth() - depth);
  size_t n = 0;
  while (n < proposal.tokens.size() && c.allows(proposal.tokens[n])) c.accept(proposal.tokens[n++]);
  c.rollback(int(n));
  proposal.tokens.resize(n);
  if (!proposal.q.empty()) proposal.q.resize(n);
}
}  // namespace

void draft_rows(DraftSession* session, int32_t last, int k, Sampler& sampler, DraftedRows& out,
                SequenceState* target) {
  // The drafter fills a DraftProposal; its vectors are the step's, swapped in and out.
  DraftProposal proposal;
  proposal.tokens.swap(out.rows);
  proposal.q.swap(out.q);
  proposal.clear();
  out.draft_seconds = 0;
  if (k > 0 && session) {
    Stopwatch sw;
    session->set_target_state(target);
    Constraint* constraint = sampler.constraint();
    int depth = constraint ? constraint->depth() : 0;
    session->propose(last, k, sampler, proposal);
    if (constraint) keep_allowed_drafts(*constraint, depth, proposal);
    out.draft_seconds = sw.seconds();
  }
  proposal.tokens.insert(proposal.tokens.begin(), last);
  out.rows.swap(proposal.tokens);
  out.q.swap(proposal.q);
}

StepTokens verify_rows(const DraftedRows& rows, const float* logits, int vocab, Sampler& sampler,
                       const VerifyRules& rules) {
  std::span<const int32_t> drafts = rows.drafts();
  // The verifier asks for row j only after d1..dj were accepted; the sampler must have
  // seen them by then (repetition penalties), as it would sampling one row at a time.
  int seen = 0;
  auto catch_up = [&](int row) {
    for (; seen < row; ++seen) sampler.accept(drafts[size_t(seen)]);
  };
  auto row_logits = [&](int row) { return logits + size_t(row) * size_t(vocab); };
  VerifyOutcome out;
  if (sampler.greedy()) {
    out = verify_greedy(drafts, [&](int row) {
      catch_up(row);
      return sampler.argmax_token(row_logits(row));
    }, sampler.rng(), rules);
  } else {
    Distribution p;
    out = verify_sampled(drafts, std::span<const Distribution>(rows.q), [&](int row) -> const Distribution& {
      catch_up(row);
      sampler.distribution(row_logits(row), p);
      return p;
    }, sampler.rng(), rules);
  }
  catch_up(out.accepted);
  sampler.accept(out.next);
  StepTokens step;
  step.accepted = out.accepted;
  step.tokens.assign(drafts.begin(), drafts.begin() + out.accepted);
  step.tokens.push_back(out.next);
  return step;
}

}  // namespace nextn
