// speculative/draft_model_drafter.cc — drafting with an independent smaller model that
// shares the target's tokenizer (--draft-model). The draft model keeps its own KV;
// each proposal first feeds whatever the target committed since (catch-up, reusing
// the longest prefix already in the draft KV), then k-1 single-token steps — for a
// batch, one draft-model forward per depth over every sequence. A DFlash drafter under
// --draft-model drafts by speculative/dflash_drafter.cc instead.
#include <algorithm>

#include "model/dflash_model.h"
#include "model/drafter_config.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "speculative/drafter.h"
#include "speculative/step.h"  // kMaxDraftsPerStep
#include "util/error.h"
#include "util/timer.h"

namespace nextn {

namespace {
constexpr int kChunk = 512;

class DraftModelSession : public DraftSession {
 public:
  DraftModelSession(Model& model, std::unique_ptr<SequenceState> kv) : model_(model), kv_(std::move(kv)) {}

  void commit(int start, std::span<const int32_t> tokens, const TargetRows&) override {
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

  // Batched drafting, first half: returns the draft KV to the longest prefix that
  // matches the target's committed tokens and readies what must be fed: the rest of
  // them and `last` (a feed longer than a chunk runs alone first, all but its last
  // chunk). Lowers k to what the draft KV still holds; false when nothing can be drafted.
  bool prepare(int32_t last, int& k) {
    size_t keep = 0;
    size_t limit = std::min(kv_seq_.size(), seq_.size());
    while (keep < limit && kv_seq_[keep] == seq_[keep]) ++keep;
    keep = size_t(kv_->longest_returnable(int(keep)));  // a recurrent draft model may have to start over
    if (int(keep) < kv_->length()) kv_->return_to(int(keep));
    kv_seq_.resize(keep);
    feed_.assign(seq_.begin() + long(keep), seq_.end());
    feed_.push_back(last);
    k = std::min(k, kv_->max_tokens() - int(keep) - int(feed_.size()));
    if (k <= 0) return false;
    while (feed_.size() > size_t(kChunk)) {
      run(std::span<const int32_t>(feed_.data(), size_t(kChunk)));
      feed_.erase(feed_.begin(), feed_.begin() + kChunk);
    }
    return true;
  }
  // Rows of a batched forward: the feed (first pass), or the session's latest draft.
  SequenceRows rows(std::span<const int32_t> tokens) {
    SequenceRows r;
    r.state = kv_.get();
    r.tokens = tokens;
    r.logit_rows.push_back(int(tokens.size()) - 1);
    kv_seq_.insert(kv_seq_.end(), tokens.begin(), tokens.end());
    return r;
  }
  std::span<const int32_t> feed() const { return feed_; }

  size_t kv_bytes() const override { return kv_->bytes_used(); }

 private:
  // Feeds `tokens` alone, without logits.
  void run(std::span<const int32_t> tokens) {
    SequenceRows r;
    r.state = kv_.get();
    r.tokens = tokens;
    model_.forward(std::span<SequenceRows>(&r, 1), result_);
    kv_seq_.insert(kv_seq_.end(), tokens.begin(), tokens.end());
  }

  Model& model_;
  std::unique_ptr<SequenceState> kv_;
  std::vector<int32_t> seq_;     // the target's committed tokens
  std::vector<int32_t> kv_seq_;  // tokens in the draft KV (committed prefix + last drafts)
  std::vector<int32_t> feed_;    // prepare(): what the first pass feeds
  ForwardResult result_;
};

class DraftModelDrafter : public Drafter {
 public:
  explicit DraftModelDrafter(std::unique_ptr<Model> model) : model_(std::move(model)) {}
  const char* name() const override { return "draft"; }
  std::unique_ptr<DraftSession> new_session(int max_tokens, const KvOptions&) override {
    return std::make_unique<DraftModelSession>(*model_, model_->new_state(max_tokens + 32, KvOptions{}));
  }

  // One draft-model forward per depth over every sequence still drafting: the first
  // feeds each sequence what it has not seen, the next ones its latest draft.
  void propose(std::span<const DraftJob> jobs, DraftPasses& passes) override {
    Stopwatch sw;
    rows_.clear();
    active_.start(jobs, [&](const DraftJob& job, int& k) {
      if (!session(job).prepare(job.last, k)) return false;
      rows_.push_back(session(job).rows(session(job).feed()));
      return true;
    });
    const int vocab = model_->config().vocab_size;
    for (int d = 0; !active_.empty(); ++d) {
      model_->forward(std::span<SequenceRows>(rows_), result_);
      for (size_t i = 0; i < active_.size(); ++i) {
        const DraftJob& job = active_[i];
        job.out->tokens.push_back(
            choose_draft(result_.logits.data() + i * size_t(vocab), vocab, *job.sampler, *job.out, work_, order_));
      }
      passes.add(int(active_.size()), sw.seconds());
      sw.reset();
      rows_.clear();
      active_.next(d, [&](size_t, size_t to) {
        const DraftJob& job = active_[to];
        rows_.push_back(session(job).rows(std::span<const int32_t>(&job.out->tokens.back(), 1)));
      });
    }
  }

 private:
  static DraftModelSession& session(const DraftJob& job) { return *static_cast<DraftModelSession*>(job.session); }

  std::unique_ptr<Model> model_;
  // One batched call's working set.
  DraftingSet active_;
  std::vector<SequenceRows> rows_;
  ForwardResult result_;
  std::vector<float> work_;
  std::vector<int32_t> order_;
};
}  // namespace

std::unique_ptr<Drafter> make_draft_model_drafter(Model& target, const SpeculativeOptions& options) {
  if (options.draft_model_dir.empty()) fail(ErrorKind::kBadInput, "--draft-model: no directory given");
  // The drafter's kind, from its config read once.
  const nlohmann::json config = drafter_config(options.draft_model_dir);
  if (MtpHead::is_eagle3(config)) return make_eagle3_drafter(target, options);
  if (DFlashModel::is_dflash(config)) return make_dflash_drafter(target, options);
  std::unique_ptr<Model> draft = Model::load(options.draft_model_dir);
  int dv = draft->config().vocab_size, tv = target.config().vocab_size;
  if (dv != tv)
    fail(ErrorKind::kBadInput,
         "--draft-model {}: vocabulary size {} does not match the target's {} ({}); drafter and target must share "
         "the tokenizer",
         options.draft_model_dir, dv, tv, target.dir());
  return std::make_unique<DraftModelDrafter>(std::move(draft));
}

int draft_model_max_drafts(const std::string& dir, int fallback) {
  const nlohmann::json config = drafter_config(dir);
  if (!DFlashModel::is_dflash(config)) return fallback;
  const int block = config.contains("block_size") && config["block_size"].is_number_integer()
                        ? config["block_size"].get<int>()
                        : 16;
  return std::clamp(block - 1, 1, kMaxDraftsPerStep);
}

}  // namespace nextn
