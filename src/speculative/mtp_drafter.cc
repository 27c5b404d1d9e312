// speculative/mtp_drafter.cc — drafting with MTP layers. Row p of the head consumes
// (h_p, x_{p+1}) — the target's post-final-norm hidden at p and the next token —
// and predicts x_{p+2}. The head's own KV is caught up over every row the target
// accepted (prompt rows included; the last row waits for the next sampled token),
// and that catch-up's last row yields the first draft. Further drafts recurse:
// layer = step mod num_layers, feeding back the head's output hidden and the token
// it just drafted at the next position. Drafted rows are dropped from the head's
// KV at the next commit, so it mirrors the target's accepted rows — except after a long
// stretch without drafts (the adaptive depth chose k = 0), when it skips all but the last
// kMtpMaxCatchUp of them (see commit).
#include "speculative/mtp_drafter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

#include "model/model.h"
#include "util/error.h"

namespace nextn {

namespace {
constexpr int kCatchUpChunk = 512;
// Commits longer than this (prompt chunks) are caught up at commit time.
constexpr int kEagerCatchUpMin = 16;

class MtpSession : public DraftSession {
 public:
  MtpSession(MtpHead& head, int hidden, int vocab, int draft_vocab, int max_tokens)
      : head_(head), hidden_(hidden), vocab_(vocab), draft_vocab_(draft_vocab) {
    // One cache per MTP layer (a cache's length is its longest layer's), F16.
    for (int l = 0; l < head.num_layers(); ++l) kv_.push_back(head.new_state(max_tokens, KvOptions{}));
  }

  void commit(int start, std::span<const int32_t> tokens, const float* hidden) override {
    if (start != committed_) rollback(start);
    drop_drafted();
    pending_tokens_.insert(pending_tokens_.end(), tokens.begin(), tokens.end());
    pending_hidden_.insert(pending_hidden_.end(), hidden, hidden + tokens.size() * size_t(hidden_));
    committed_ += int(tokens.size());
    // A prompt (before drafting begins, or any long commit) is caught up here once many
    // rows are pending, all but the last (whose next token is not known yet), so the
    // first propose() runs one row instead of the whole prompt through the head. Rows
    // committed a step at a time wait for propose(), and only the last kMtpMaxCatchUp are
    // kept (or the whole latest step, if longer): a stretch of steps without drafts (the
    // adaptive depth chose k = 0) then costs the head nothing.
    if (!drafting_ || int(tokens.size()) > kEagerCatchUpMin) {
      if (int(pending_tokens_.size()) > kEagerCatchUpMin) catch_up(int(pending_tokens_.size()) - 1, 0, false);
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
    // A new request: its prompt follows.
    drafting_ = false;
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

  void propose(int32_t last, int k, Sampler& sampler, DraftProposal& out) override {
    out.clear();
    if (k <= 0) return;
    drafting_ = true;
    drop_drafted();
    if (pending_tokens_.empty() && done_ > 0 && done_ == committed_ && !last_hidden_.empty()) {
      // Proposing again without a commit in between: redo the last row.
      done_ -= 1;
      for (auto& kv : kv_) kv->return_to(kv_rows());
      pending_tokens_.push_back(last_token_);
      pending_hidden_ = last_hidden_;
    }
    if (pending_tokens_.empty()) return;
    k = std::min(k, kv_[0]->max_tokens() - committed_);
    catch_up(int(pending_tokens_.size()), last, true);

    // The catch-up's last row gives draft 1; then recurse one row per draft.
    g_.assign(hidden_out_.end() - hidden_, hidden_out_.end());
    out.tokens.push_back(choose(sampler, out));
    for (int step = 1; step < k; ++step) {
      int32_t tok = out.tokens.back();
      run_all_layers(step % head_.num_layers(), g_.data(), std::span<const int32_t>(&tok, 1), {0});
      g_.assign(hidden_out_.end() - hidden_, hidden_out_.end());
      out.tokens.push_back(choose(sampler, out));
    }
  }

  size_t kv_bytes() const override {
    size_t n = 0;
    for (auto& kv : kv_) n += kv->bytes_used();
    return n;
  }

 private:
  // Runs the head over the first `rows` pending rows p = done_.. (row p pairs with token
  // x_{p+1}: the next pending token, or `next` for the last pending row), in chunks;
  // with `logits`, the last row's logits are computed. Those rows leave the pending list.
  void catch_up(int rows, int32_t next, bool logits) {
    if (rows <= 0) return;
    const size_t r = size_t(rows);
    std::vector<int32_t> next_tokens(pending_tokens_.begin() + 1, pending_tokens_.begin() + std::ptrdiff_t(r));
    next_tokens.push_back(r < pending_tokens_.size() ? pending_tokens_[r] : next);
    for (int begin = 0; begin < rows; begin += kCatchUpChunk) {
      int n = std::min(kCatchUpChunk, rows - begin);
      std::span<const int32_t> toks(next_tokens.data() + begin, size_t(n));
      const float* h = pending_hidden_.data() + size_t(begin) * size_t(hidden_);
      std::vector<int> logit_rows;
      if (logits && begin + n == rows) logit_rows.push_back(n - 1);
      run_all_layers(0, h, toks, logit_rows);
    }
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
  // Runs `layer` for logits/hidden and, with several MTP layers, the others over
  // the same rows so every layer's KV covers every position.
  void run_all_layers(int layer, const float* h, std::span<const int32_t> toks, const std::vector<int>& logit_rows) {
    for (int other = 0; other < head_.num_layers(); ++other) {
      if (other == layer) continue;
      head_.forward(other, *kv_[size_t(other)], h, toks, {}, scratch_logits_, scratch_hidden_);
    }
    if (draft_vocab_ >= vocab_) {
      head_.forward(layer, *kv_[size_t(layer)], h, toks, logit_rows, logits_, hidden_out_);
      return;
    }
    // Reduced draft vocabulary: the first draft_vocab_ rows of the output projection.
    head_.forward(layer, *kv_[size_t(layer)], h, toks, {}, logits_, hidden_out_);
    WeightMatrix w = head_.output_head(layer);
    w.rows = draft_vocab_;
    logits_.assign(size_t(vocab_), -INFINITY);
    for (int r : logit_rows) matmul(w, hidden_out_.data() + size_t(r) * size_t(hidden_), 1, logits_.data());
  }

  int32_t choose(Sampler& sampler, DraftProposal& out) {
    return choose_draft(logits_.data() + logits_.size() - size_t(vocab_), vocab_, sampler, out, work_, order_);
  }

  MtpHead& head_;
  int hidden_, vocab_, draft_vocab_;
  std::vector<std::unique_ptr<SequenceState>> kv_;  // the head's attention KV, one state per MTP layer
  int committed_ = 0;  // target rows committed
  int done_ = 0;       // target rows the head has passed (run or skipped); drafted rows beyond
  int skipped_ = 0;    // of those, rows skipped without running (kMtpMaxCatchUp)
  bool drafting_ = false;  // propose() has run: the prompt is behind us
  std::vector<int32_t> pending_tokens_;  // tokens at positions done_..committed_-1
  std::vector<float> pending_hidden_;    // their target hidden states
  int32_t last_token_ = 0;               // the token and hidden of row done_-1 (to redo it)
  std::vector<float> last_hidden_;
  std::vector<float> logits_, hidden_out_, scratch_logits_, scratch_hidden_, g_, work_;
  std::vector<int32_t> order_;
};

class MtpDrafter : public Drafter {
 public:
  MtpDrafter(const char* name, MtpHead* head, std::unique_ptr<MtpHead> owned, const ModelConfig& config,
             int draft_vocab)
      : name_(name), head_(head), owned_(std::move(owned)), hidden_(config.hidden_size), vocab_(config.vocab_size),
        draft_vocab_(draft_vocab) {}
  const char* name() const override { return name_; }
  bool needs_hidden() const override { return true; }
  std::unique_ptr<DraftSession> new_session(int max_tokens, const KvOptions&) override {
    return std::make_unique<MtpSession>(*head_, hidden_, vocab_, draft_vocab_, max_tokens + 32);
  }

 private:
  const char* name_;
  MtpHead* head_;
  std::unique_ptr<MtpHead> owned_;
  int hidden_, vocab_, draft_vocab_;
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
  if (!head)
    fail(ErrorKind::kBadInput, "--mtp: checkpoint {} has no MTP layers (num_nextn_predict_layers is 0 or absent)",
         target.dir());
  return make_mtp_head_drafter("mtp", head, nullptr, target.config(), options.draft_vocab);
}

}  // namespace nextn
