// speculative/mtp_drafter.cc — drafting with MTP layers. Row p of the head consumes
// (h_p, x_{p+1}) — the target's post-final-norm hidden at p and the next token —
// and predicts x_{p+2}. The head's own KV is caught up over every row the target
// accepted (prompt rows included; the last row waits for the next sampled token),
// and that catch-up's last row yields the first draft. Further drafts recurse:
// layer = step mod num_layers, feeding back the head's output hidden and the token
// it just drafted at the next position. A batch drafts together: one head forward
// catches every sequence up (and gives each its first draft), then one forward per
// further depth runs a row of every sequence still drafting, so B sequences stream
// the head's weights once per depth, not B times. Drafted rows are dropped from the head's
// KV at the next commit, so it mirrors the target's accepted rows — except after a step
// without drafts (the planner chose depth 0), when it skips all but the last
// kMtpMaxCatchUp of the rows it has not run (see commit).
#include "speculative/mtp_drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

#include "model/model.h"
#include "util/error.h"
#include "util/timer.h"

namespace nextn {

namespace {
constexpr int kCatchUpChunk = 512;
// The batched first pass runs at most this many rows of a sequence; longer stretches (a
// prompt, a long accepted step) are caught up alone first, in chunks.
constexpr int kBatchedCatchUpMax = 16;
// Rows waiting for the first propose() of a request are caught up at commit beyond this
// many (they hold a hidden state each).
constexpr int kMaxDeferredRows = 2048;

class MtpSession : public DraftSession {
 public:
  MtpSession(MtpHead& head, int max_tokens) : head_(head), hidden_(head.input_width()) {
    // One cache per MTP layer (a cache's length is its longest layer's), F16.
    for (int l = 0; l < head.num_layers(); ++l) kv_.push_back(head.new_state(max_tokens, KvOptions{}));
  }

  void commit(int start, std::span<const int32_t> tokens, const TargetRows& target) override {
    const float* hidden = target.post_norm;
    if (!head_.target_streams().empty()) {
      // A head reading target layer inputs (EAGLE-3) keeps their projection as its h.
      projected_.resize(tokens.size() * size_t(hidden_));
      if (!tokens.empty()) head_.project_target(target.streams, int(tokens.size()), projected_.data());
      hidden = projected_.data();
    }
    if (start != committed_) rollback(start);
    drop_drafted();
    pending_tokens_.insert(pending_tokens_.end(), tokens.begin(), tokens.end());
    pending_hidden_.insert(pending_hidden_.end(), hidden, hidden + tokens.size() * size_t(hidden_));
    committed_ += int(tokens.size());
    // Rows wait for propose(). A prompt waits whole for the request's first decode step:
    // if that step drafts, the head catches up on all of it (after the first token, not
    // inside the prefill). A step that commits without having drafted (the planner chose
    // depth 0) keeps only the last kMtpMaxCatchUp rows (or the whole latest step, if
    // longer), the prompt's included: a sequence that does not draft costs the head
    // nothing, and a later probe catches up on a few rows, not on the prompt.
    if (int(tokens.size()) > kBatchedCatchUpMax) {
      if (int(pending_tokens_.size()) > kMaxDeferredRows) catch_up(int(pending_tokens_.size()) - 1);
    } else if (int skip = int(pending_tokens_.size()) - std::max(kMtpMaxCatchUp, int(tokens.size())); skip > 0) {
      // The head's attention then lacks the skipped rows and sees the rest at positions
      // shifted back by them (RoPE is relative: only the distance to the rows before the
      // gap shrinks). Drafts may be accepted less often; the verifier keeps the output
      // exact either way.
      pending_tokens_.erase(pending_tokens_.begin(), pending_tokens_.begin() + skip);
      pending_hidden_.erase(pending_hidden_.begin(), pending_hidden_.begin() + std::ptrdiff_t(skip * size_t(hidden_)));
      done_ += skip;
      skipped_ += skip;
    }
  }

  void rollback(int n) override {
    if (n >= committed_) {
      drop_drafted();
      return;
    }
    if (done_ > n) {
      // Rows skipped before n leave no KV length to return to: the head restarts there.
      if (skipped_ > 0) skipped_ = n;
      done_ = n;
      last_hidden_.clear();
      pending_tokens_.clear();
      pending_hidden_.clear();
    } else {
      pending_tokens_.resize(size_t(n - done_));
      pending_hidden_.resize(size_t(n - done_) * size_t(hidden_));
    }
    drop_drafted();
    committed_ = n;
  }

  // Batched drafting, first half: readies the rows this session's catch-up runs (the
  // pending rows, the last one paired with `last`). Returns false when there is nothing
  // to draft from; lowers k to what the head's cache still holds.
  bool prepare(int32_t last, int& k) {
    drop_drafted();
    if (pending_tokens_.empty() && done_ > 0 && done_ == committed_ && !last_hidden_.empty()) {
      // Proposing again without a commit in between: redo the last row.
      done_ -= 1;
      for (auto& kv : kv_) kv->return_to(kv_rows());
      pending_tokens_.push_back(last_token_);
      pending_hidden_ = last_hidden_;
    }
    k = std::min(k, kv_[0]->max_tokens() - committed_);
    if (pending_tokens_.empty() || k <= 0) return false;
    // A long stretch (a prompt) runs alone first, in chunks: the batched pass stays small.
    if (int(pending_tokens_.size()) > kBatchedCatchUpMax) catch_up(int(pending_tokens_.size()) - 1);
    next_tokens_.assign(pending_tokens_.begin() + 1, pending_tokens_.end());
    next_tokens_.push_back(last);
    return true;
  }
  // The catch-up rows of prepare(), as one sequence of a batched head call of `layer`.
  MtpRows catch_up_rows(int layer) const {
    return MtpRows{kv_[size_t(layer)].get(), pending_hidden_.data(), next_tokens_, {int(next_tokens_.size()) - 1}};
  }
  // The catch-up ran: its rows leave the pending list.
  void caught_up() { finish_catch_up(int(pending_tokens_.size())); }
  SequenceState& layer_state(int layer) { return *kv_[size_t(layer)]; }

  size_t kv_bytes() const override {
    size_t n = 0;
    for (auto& kv : kv_) n += kv->bytes_used();
    return n;
  }

 private:
  // Runs the head over the first `rows` pending rows p = done_.. (row p pairs with token
  // x_{p+1}, the next pending token; rows < pending), alone and in chunks (prompts);
  // those rows leave the pending list.
  void catch_up(int rows) {
    if (rows <= 0) return;
    const size_t r = size_t(rows);
    std::vector<int32_t> next_tokens(pending_tokens_.begin() + 1, pending_tokens_.begin() + std::ptrdiff_t(r) + 1);
    for (int begin = 0; begin < rows; begin += kCatchUpChunk) {
      int n = std::min(kCatchUpChunk, rows - begin);
      std::span<const int32_t> toks(next_tokens.data() + begin, size_t(n));
      const float* h = pending_hidden_.data() + size_t(begin) * size_t(hidden_);
      for (int layer = 0; layer < head_.num_layers(); ++layer)
        head_.forward(layer, *kv_[size_t(layer)], h, toks, {}, scratch_logits_, scratch_hidden_);
    }
    finish_catch_up(rows);
  }

  void finish_catch_up(int rows) {
    const size_t r = size_t(rows);
    done_ += rows;
    last_token_ = pending_tokens_[r - 1];
    last_hidden_.assign(pending_hidden_.begin() + std::ptrdiff_t((r - 1) * size_t(hidden_)),
                        pending_hidden_.begin() + std::ptrdiff_t(r * size_t(hidden_)));
    pending_tokens_.erase(pending_tokens_.begin(), pending_tokens_.begin() + std::ptrdiff_t(r));
    pending_hidden_.erase(pending_hidden_.begin(), pending_hidden_.begin() + std::ptrdiff_t(r * size_t(hidden_)));
  }

  void drop_drafted() {
    for (auto& kv : kv_)
      if (kv->length() > kv_rows()) kv->return_to(kv_rows());
  }
  // Rows in the head's KV: the target rows it has run, less those it skipped.
  int kv_rows() const { return done_ - skipped_; }
  MtpHead& head_;
  int hidden_;
  std::vector<std::unique_ptr<SequenceState>> kv_;  // the head's attention KV, one state per MTP layer
  int committed_ = 0;  // target rows committed
  int done_ = 0;       // target rows the head has passed (run or skipped); drafted rows beyond
  int skipped_ = 0;    // of those, rows skipped without running (kMtpMaxCatchUp)
  std::vector<int32_t> pending_tokens_;  // tokens at positions done_..committed_-1
  std::vector<float> pending_hidden_;    // their target hidden states
  int32_t last_token_ = 0;               // the token and hidden of row done_-1 (to redo it)
  std::vector<float> last_hidden_;
  std::vector<int32_t> next_tokens_;     // prepare(): the catch-up rows' next tokens
  std::vector<float> scratch_logits_, scratch_hidden_, projected_;
};

class MtpDrafter : public Drafter {
 public:
  MtpDrafter(const char* name, MtpHead* head, std::unique_ptr<MtpHead> owned, const ModelConfig& config,
             int draft_vocab)
      : name_(name), head_(head), owned_(std::move(owned)), hidden_(head->input_width()), vocab_(config.vocab_size),
        draft_vocab_(head->draft_ids().empty() ? draft_vocab : int(head->draft_ids().size())) {}
  const char* name() const override { return name_; }
  TargetReads reads() const override {
    std::vector<int> streams = head_->target_streams();
    return {.post_norm = streams.empty(), .streams = std::move(streams)};
  }
  std::unique_ptr<DraftSession> new_session(int max_tokens, const KvOptions&) override {
    return std::make_unique<MtpSession>(*head_, max_tokens + 32);
  }

  void propose(std::span<const DraftJob> jobs, DraftPasses& passes) override {
    // Pass 0: every session's catch-up rows in one forward; its last row gives draft 1.
    // (A prompt caught up alone in prepare() is not the pass's cost: it happens once.)
    active_.start(jobs, [](const DraftJob& job, int& k) { return session(job).prepare(job.last, k); });
    if (active_.empty()) return;
    Stopwatch sw;
    rows_.resize(active_.size());
    run_layers(0, [&](size_t i, int layer) { rows_[i] = session(active_[i]).catch_up_rows(layer); });
    // Each sequence's h for the next depth: the last catch-up row's output.
    h_.resize(active_.size() * size_t(hidden_));
    for (size_t i = 0, row = 0; i < active_.size(); ++i) {
      row += rows_[i].tokens.size();
      std::copy_n(hidden_out_.data() + (row - 1) * size_t(hidden_), hidden_, h_.data() + i * size_t(hidden_));
      session(active_[i]).caught_up();
    }
    for (size_t i = 0; i < active_.size(); ++i) choose(active_[i], i);
    passes.add(int(active_.size()), sw.seconds());

    // Depth d: one row of every sequence that wants more than d drafts.
    for (int d = 1;; ++d) {
      sw.reset();
      active_.next(d - 1, [&](size_t from, size_t to) {
        std::copy_n(h_.data() + from * size_t(hidden_), hidden_, h_.data() + to * size_t(hidden_));
      });
      if (active_.empty()) break;
      const size_t n = active_.size();
      rows_.resize(n);
      run_layers(d % head_->num_layers(), [&](size_t i, int layer) {
        const DraftJob& job = active_[i];
        rows_[i] = MtpRows{&session(job).layer_state(layer), h_.data() + i * size_t(hidden_),
                           std::span<const int32_t>(&job.out->tokens.back(), 1), {0}};
      });
      std::copy_n(hidden_out_.data(), n * size_t(hidden_), h_.data());
      for (size_t i = 0; i < n; ++i) choose(active_[i], i);
      passes.add(int(n), sw.seconds());
    }
  }

 private:
  static MtpSession& session(const DraftJob& job) { return *static_cast<MtpSession*>(job.session); }

  // Runs `layer` over every active sequence's rows (fill(i, layer) sets rows_[i] for a
  // layer) for logits and hidden_out_, and, with several MTP layers, the others over the
  // same rows so every layer's KV covers every position.
  template <class Fill>
  void run_layers(int layer, Fill fill) {
    for (int other = 0; other < head_->num_layers(); ++other) {
      if (other == layer) continue;
      for (size_t i = 0; i < rows_.size(); ++i) fill(i, other), rows_[i].logit_rows.clear();
      head_->forward(other, rows_, scratch_logits_, scratch_hidden_);
    }
    for (size_t i = 0; i < rows_.size(); ++i) fill(i, layer);
    head_->forward(layer, rows_, logits_, hidden_out_, draft_vocab_ < vocab_ ? draft_vocab_ : 0);
  }

  // The next draft of active sequence i from its row of logits_. A reduced draft
  // vocabulary scores only some tokens — the first ids (--draft-vocab), or the head's own
  // (EAGLE-3's d2t) — and every other token is -inf: q is zero there, so verification
  // stays exact.
  void choose(const DraftJob& job, size_t i) {
    const std::span<const int32_t> ids = head_->draft_ids();
    const int dv = std::min(draft_vocab_, vocab_);
    const float* row = logits_.data() + i * size_t(dv);
    if (dv < vocab_ && job.sampler->greedy() && !job.sampler->constraint()) {
      // The argmax lies among the scored ids: no need to widen the row to the vocabulary.
      const int32_t best = argmax(row, dv);
      job.out->tokens.push_back(ids.empty() ? best : ids[size_t(best)]);
      return;
    }
    if (dv < vocab_) {
      full_.assign(size_t(vocab_), -INFINITY);
      if (ids.empty()) std::copy_n(row, dv, full_.data());
      else
        for (int c = 0; c < dv; ++c) full_[size_t(ids[size_t(c)])] = row[c];
      row = full_.data();
    }
    job.out->tokens.push_back(choose_draft(row, vocab_, *job.sampler, *job.out, work_, order_));
  }

  const char* name_;
  MtpHead* head_;
  std::unique_ptr<MtpHead> owned_;
  int hidden_, vocab_, draft_vocab_;
  // One batched call's working set.
  DraftingSet active_;  // sequences still drafting
  std::vector<MtpRows> rows_;
  std::vector<float> h_, logits_, hidden_out_, scratch_logits_, scratch_hidden_, full_, work_;
  std::vector<int32_t> order_;
};
}  // namespace

std::unique_ptr<Drafter> make_mtp_head_drafter(const char* name, MtpHead* head, std::unique_ptr<MtpHead> owned,
                                               const ModelConfig& target_config, int draft_vocab) {
  int vocab = target_config.vocab_size;
  int dv = draft_vocab < 0 ? (vocab > 65536 ? 32768 : vocab) : draft_vocab == 0 ? vocab : std::min(draft_vocab, vocab);
  return std::make_unique<MtpDrafter>(name, head, std::move(owned), target_config, dv);
}

std::unique_ptr<Drafter> make_mtp_drafter(Model& target, const SpeculativeOptions& options) {
  MtpHead* head = target.mtp_head();
  if (!head && !target.config().mtp_unavailable.empty())
    fail(ErrorKind::kUnsupported, "--mtp: {}", target.config().mtp_unavailable);
  if (!head)
    fail(ErrorKind::kBadInput, "--mtp: checkpoint {} has no MTP layers (num_nextn_predict_layers is 0 or absent)",
         target.dir());
  return make_mtp_head_drafter("mtp", head, nullptr, target.config(), options.draft_vocab);
}

}  // namespace nextn
