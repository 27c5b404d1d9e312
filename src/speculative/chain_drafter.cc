// speculative/chain_drafter.cc — two drafters chained (mode "BASE+TAKEOVER", e.g.
// `--mtp --spec-type suffix`): the take-over drafter, a cheap lookup, proposes first for
// every sequence, and where it drafts at least kTakeOverTokens tokens (a long match: the
// text is repeating) its drafts are used; every other sequence drafts with the base (the
// MTP head, an assistant, a draft model), batched as usual. Both sessions follow every
// commit and rollback, so either can draft at any step.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "speculative/drafter.h"
#include "util/error.h"

namespace nextn {

namespace {

constexpr int kTakeOverTokens = 3;  // drafts from the take-over drafter that win the step

class ChainSession : public DraftSession {
 public:
  ChainSession(std::unique_ptr<DraftSession> base, std::unique_ptr<DraftSession> takeover)
      : base_(std::move(base)), takeover_(std::move(takeover)) {}
  void commit(int start, std::span<const int32_t> tokens, const TargetRows& target) override {
    base_->commit(start, tokens, target);
    takeover_->commit(start, tokens, target);
  }
  void rollback(int n) override {
    base_->rollback(n);
    takeover_->rollback(n);
  }
  void request_finished(int prompt_tokens) override {
    base_->request_finished(prompt_tokens);
    takeover_->request_finished(prompt_tokens);
  }
  size_t kv_bytes() const override { return base_->kv_bytes() + takeover_->kv_bytes(); }
  DraftSession* base() const { return base_.get(); }
  DraftSession* takeover() const { return takeover_.get(); }

 private:
  std::unique_ptr<DraftSession> base_, takeover_;
};

class ChainDrafter : public Drafter {
 public:
  ChainDrafter(std::unique_ptr<Drafter> base, std::unique_ptr<Drafter> takeover)
      : base_(std::move(base)), takeover_(std::move(takeover)),
        name_(std::string(base_->name()) + "+" + takeover_->name()) {
    // One set of target rows feeds both sessions: the streams must be one drafter's.
    if (!base_->reads().streams.empty() && !takeover_->reads().streams.empty() &&
        base_->reads().streams != takeover_->reads().streams)
      fail(ErrorKind::kUnsupported, "{}: the two drafters read different layers of the target; chain one of them "
           "with a lookup drafter (suffix, ngram) instead", name_);
  }
  const char* name() const override { return name_.c_str(); }
  TargetReads reads() const override {
    TargetReads a = base_->reads(), b = takeover_->reads();
    a.post_norm = a.post_norm || b.post_norm;
    if (a.streams.empty()) a.streams = b.streams;
    return a;
  }
  std::unique_ptr<DraftSession> new_session(int max_tokens, const KvOptions& kv) override {
    return std::make_unique<ChainSession>(base_->new_session(max_tokens, kv), takeover_->new_session(max_tokens, kv));
  }

  void propose(std::span<const DraftJob> jobs, DraftPasses& passes) override {
    std::vector<DraftJob> first(jobs.begin(), jobs.end());
    for (DraftJob& job : first) job.session = static_cast<ChainSession*>(job.session)->takeover();
    takeover_->propose(first, passes);
    std::vector<DraftJob> rest;
    for (const DraftJob& job : jobs)
      if (int(job.out->tokens.size()) < std::min(job.k, kTakeOverTokens)) {
        rest.push_back(job);
        rest.back().session = static_cast<ChainSession*>(job.session)->base();
      } else {
        job.out->drafter = takeover_->name();
      }
    if (!rest.empty()) base_->propose(rest, passes);
    for (const DraftJob& job : rest) job.out->drafter = base_->name();
  }

 private:
  std::unique_ptr<Drafter> base_, takeover_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Drafter> make_chain_drafter(std::unique_ptr<Drafter> base, std::unique_ptr<Drafter> takeover) {
  return std::make_unique<ChainDrafter>(std::move(base), std::move(takeover));
}

}  // namespace nextn
