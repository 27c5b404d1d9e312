// speculative/draft_model_drafter.cc — drafting with an independent smaller model that
// shares the target's tokenizer (--draft-model). The draft model keeps its own KV;
// each proposal first feeds whatever the target committed since (catch-up, reusing
// the longest prefix already in the draft KV), then k-1 single-token steps.
#include <algorithm>

#include "model/model.h"
#include "speculative/drafter.h"
#include "util/error.h"

namespace nextn {

namespace {
constexpr int kChunk = 512;

class DraftModelSession : public DraftSession {
 public:
  DraftModelSession(Model& model, std::unique_ptr<SequenceState> kv) : model_(model), kv_(std::move(kv)) {}

  void commit(int start, std::span<const int32_t> tokens, const float*) override {
    if (start < int(seq_.size())) seq_.resize(size_t(start));
    seq_.insert(seq_.end(), tokens.begin(), tokens.end());
  }

  void rollback(int n) override {
    if (n < int(seq_.size())) seq_.resize(size_t(n));
    if (n < kv_->length()) {
      n = kv_->longest_returnable(n);
      kv_->return_to(n);
      kv_seq_.resize(size_t(n));
    }
  }

  void propose(int32_t last, int k, Sampler& sampler, DraftProposal& out) override {
    out.clear();
    if (k <= 0) return;
    // Keep the longest prefix of the draft KV that matches seq_ + [last], but feed at least `last`.
    size_t keep = 0;
    size_t limit = std::min(kv_seq_.size(), seq_.size());
    while (keep < limit && kv_seq_[keep] == seq_[keep]) ++keep;
    keep = size_t(kv_->longest_returnable(int(keep)));  // a recurrent draft model may have to start over
    if (int(keep) < kv_->length()) kv_->return_to(int(keep));
    kv_seq_.resize(keep);
    std::vector<int32_t> feed(seq_.begin() + long(keep), seq_.end());
    feed.push_back(last);
    int room = kv_->max_tokens() - int(keep) - int(feed.size());
    k = std::min(k, room);
    if (k <= 0) return;
    for (size_t begin = 0; begin < feed.size(); begin += kChunk) {
      size_t n = std::min<size_t>(kChunk, feed.size() - begin);
      run(std::span<const int32_t>(feed.data() + begin, n), begin + n == feed.size());
    }
    out.tokens.push_back(choose(sampler, out));
    for (int step = 1; step < k; ++step) {
      int32_t tok = out.tokens.back();
      run(std::span<const int32_t>(&tok, 1), true);
      out.tokens.push_back(choose(sampler, out));
    }
  }

  size_t kv_bytes() const override { return kv_->bytes_used(); }

 private:
  void run(std::span<const int32_t> tokens, bool want_logits) {
    SequenceRows rows;
    rows.state = kv_.get();
    rows.tokens = tokens;
    if (want_logits) rows.logit_rows.push_back(int(tokens.size()) - 1);
    model_.forward(std::span<SequenceRows>(&rows, 1), result_);
    kv_seq_.insert(kv_seq_.end(), tokens.begin(), tokens.end());
  }

  int32_t choose(Sampler& sampler, DraftProposal& out) {
    return choose_draft(result_.logits.data(), model_.config().vocab_size, sampler, out, work_, order_);
  }

  Model& model_;
  std::unique_ptr<SequenceState> kv_;
  std::vector<int32_t> seq_;     // the target's committed tokens
  std::vector<int32_t> kv_seq_;  // tokens in the draft KV (committed prefix + last drafts)
  ForwardResult result_;
  std::vector<float> work_;
  std::vector<int32_t> order_;
};

class DraftModelDrafter : public Drafter {
 public:
  explicit DraftModelDrafter(std::unique_ptr<Model> model) : model_(std::move(model)) {}
  const char* name() const override { return "draft"; }
  bool needs_hidden() const override { return false; }
  std::unique_ptr<DraftSession> new_session(int max_tokens, const KvOptions&) override {
    return std::make_unique<DraftModelSession>(*model_, model_->new_state(max_tokens + 32, KvOptions{}));
  }

 private:
  std::unique_ptr<Model> model_;
};
}  // namespace

std::unique_ptr<Drafter> make_draft_model_drafter(Model& target, const SpeculativeOptions& options) {
  if (options.draft_model_dir.empty()) fail(ErrorKind::kBadInput, "--draft-model: no directory given");
  std::unique_ptr<Model> draft = Model::load(options.draft_model_dir);
  int dv = draft->config().vocab_size, tv = target.config().vocab_size;
  if (dv != tv)
    fail(ErrorKind::kBadInput,
         "--draft-model {}: vocabulary size {} does not match the target's {} ({}); drafter and target must share "
         "the tokenizer",
         options.draft_model_dir, dv, tv, target.dir());
  return std::make_unique<DraftModelDrafter>(std::move(draft));
}

}  // namespace nextn
