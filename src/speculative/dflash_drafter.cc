// speculative/dflash_drafter.cc — drafting with a DFlash block-diffusion drafter
// (--draft-model with a DFlashDraftModel checkpoint or a `dflash` GGUF; model/dflash_model.h).
// The session keeps the drafter's context cache: for every committed target row, per
// drafter layer, the keys and values made from the target's residual streams at that row
// (appended at commit, truncated on rollback). A proposal is ONE drafter forward over the
// blocks [last, M, …, M] of every drafting sequence, k + 1 rows each (k at most
// block_size − 1); the drafts are the target-head logits of slots 1..k, all at once, so
// a draft never feeds the next. The block's own keys and values are never stored. The
// target's head scores the drafts, so --draft-vocab narrows it as for MTP heads.
#include <algorithm>
#include <cmath>

#include "model/dflash_model.h"
#include "model/model.h"
#include "speculative/drafter.h"
#include "util/error.h"
#include "util/timer.h"

namespace nextn {
namespace {

class DFlashSession : public DraftSession {
 public:
  explicit DFlashSession(DFlashModel& model) : model_(model), context_(model.new_context()) {}

  void commit(int start, std::span<const int32_t> tokens, const TargetRows& target) override {
    context_.truncate(start);
    committed_ = start + int(tokens.size());
    // Rows the context cannot take (a gap, or no streams) leave it short of committed_:
    // the session then stops drafting until a rollback brings the two together.
    if (start == context_.length && target.streams) model_.add_context(context_, target.streams, int(tokens.size()));
  }

  void rollback(int n) override {
    context_.truncate(n);
    committed_ = std::min(committed_, n);
  }

  // Whether the context covers every row the target committed (the block then starts at
  // its end); lowers k to the block and to the room left in the target's state.
  bool ready(const SequenceState* target, int& k) const {
    if (!target || committed_ == 0 || context_.length != committed_ || target->length() != committed_) return false;
    k = std::min({k, model_.block_size() - 1, target->max_tokens() - committed_ - 1});
    return k > 0;
  }
  const DFlashContext& context() const { return context_; }

  size_t kv_bytes() const override { return context_.bytes(); }

 private:
  DFlashModel& model_;
  DFlashContext context_;
  int committed_ = 0;  // the target's committed length as the commits told it
};

class DFlashDrafter : public Drafter {
 public:
  DFlashDrafter(std::unique_ptr<DFlashModel> model, const ModelConfig& target, int draft_vocab)
      : model_(std::move(model)), vocab_(target.vocab_size), draft_vocab_(draft_vocab) {}
  const char* name() const override { return "dflash"; }
  TargetReads reads() const override { return {.post_norm = false, .streams = model_->streams()}; }
  std::unique_ptr<DraftSession> new_session(int, const KvOptions&) override {
    return std::make_unique<DFlashSession>(*model_);
  }

  void propose(std::span<const DraftJob> jobs, DraftPasses& passes) override {
    Stopwatch sw;
    depths_.clear();
    active_.start(jobs, [&](const DraftJob& job, int& k) {
      if (!session(job).ready(job.target, k)) return false;
      depths_.push_back(k);
      return true;
    });
    if (active_.empty()) return;
    // Each block: [last, M × k]; the spans are made once the token buffer stops growing.
    tokens_.clear();
    for (size_t i = 0; i < active_.size(); ++i) {
      tokens_.push_back(active_[i].last);
      tokens_.insert(tokens_.end(), size_t(depths_[i]), model_->mask_token());
    }
    blocks_.clear();
    size_t offset = 0;
    for (size_t i = 0; i < active_.size(); ++i) {
      const size_t n = size_t(depths_[i]) + 1;
      blocks_.push_back({&session(active_[i]).context(), std::span<const int32_t>(tokens_.data() + offset, n)});
      offset += n;
    }
    model_->draft_blocks(blocks_, logits_, draft_vocab_ < vocab_ ? draft_vocab_ : 0);
    size_t row = 0;
    for (size_t i = 0; i < active_.size(); ++i)
      for (int s = 0; s < depths_[i]; ++s, ++row) choose(active_[i], logits_.data() + row * size_t(draft_vocab_));
    passes.add(int(active_.size()), sw.seconds());
    // The deeper drafts came with that one forward: their passes cost nothing, so the
    // planner prices a deep block by its verify rows, not by passes it never runs.
    for (int d = 1;; ++d) {
      const int deeper = int(std::count_if(depths_.begin(), depths_.end(), [d](int k) { return k > d; }));
      if (deeper == 0) break;
      passes.add(deeper, 0.0);
    }
  }

 private:
  // A draft from a row of draft_vocab_ logits (a reduced draft vocabulary scores only the
  // first ids: the others are -inf, q zero there).
  void choose(const DraftJob& job, const float* row) {
    if (draft_vocab_ < vocab_ && job.sampler->greedy() && !job.sampler->constraint()) {
      job.out->tokens.push_back(int32_t(std::max_element(row, row + draft_vocab_) - row));
      return;
    }
    if (draft_vocab_ < vocab_) {
      full_.assign(size_t(vocab_), -INFINITY);
      std::copy_n(row, draft_vocab_, full_.data());
      row = full_.data();
    }
    job.out->tokens.push_back(choose_draft(row, vocab_, *job.sampler, *job.out, work_, order_));
  }

  static DFlashSession& session(const DraftJob& job) { return *static_cast<DFlashSession*>(job.session); }

  std::unique_ptr<DFlashModel> model_;
  int vocab_;
  int draft_vocab_;  // ids scored (--draft-vocab), <= vocab_
  // One batched call's working set.
  DraftingSet active_;
  std::vector<int> depths_;  // per drafting job: its k
  std::vector<int32_t> tokens_;
  std::vector<DFlashBlock> blocks_;
  std::vector<float> logits_, full_, work_;
  std::vector<int32_t> order_;
};

}  // namespace

std::unique_ptr<Drafter> make_dflash_drafter(Model& target, const SpeculativeOptions& options) {
  if (options.draft_model_dir.empty()) fail(ErrorKind::kBadInput, "dflash: no drafter given (--draft-model)");
  // --draft-vocab as for MTP heads: the target's head is the drafter's.
  const int vocab = target.config().vocab_size, dv = options.draft_vocab;
  const int draft_vocab = dv < 0 ? (vocab > 65536 ? 32768 : vocab) : dv == 0 ? vocab : std::min(dv, vocab);
  return std::make_unique<DFlashDrafter>(DFlashModel::load(options.draft_model_dir, target), target.config(),
                                         draft_vocab);
}

}  // namespace nextn
