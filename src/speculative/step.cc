// speculative/step.cc — see step.h.
#include "speculative/step.h"


namespace nextn {

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
