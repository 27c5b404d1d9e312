// speculative/gemma4_assistant_drafter.cc — drafting with a Gemma 4 "-assistant"
// checkpoint (--mtp-assistant-model, model/gemma4_assistant.h). The session keeps only
// the target's post-norm hidden state of the last committed row: every draft step runs
// the assistant at the target's last position over the target's own KV (read, never
// written), so rollback is just forgetting that hidden state.
#include <algorithm>

#include "model/gemma4_assistant.h"
#include "model/model.h"
#include "speculative/drafter.h"
#include "util/error.h"
#include "util/timer.h"

namespace nextn {
namespace {

class Gemma4AssistantSession : public DraftSession {
 public:
  explicit Gemma4AssistantSession(int hidden) : hidden_(hidden) {}

  void commit(int start, std::span<const int32_t> tokens, const TargetRows& target) override {
    const float* hidden = target.post_norm;
    committed_ = start + int(tokens.size());
    if (tokens.empty()) return;
    if (!hidden) {
      has_hidden_ = false;
      return;
    }
    const float* last = hidden + (tokens.size() - 1) * size_t(hidden_);
    last_hidden_.assign(last, last + hidden_);
    has_hidden_ = true;
  }

  void rollback(int n) override {
    if (n < committed_) has_hidden_ = false;  // the hidden state of row n - 1 is not known
    committed_ = std::min(committed_, n);
  }

  // Whether drafting can start at the target's current end (its last row produced the
  // job's `last`); lowers k to the room left in the target's cache.
  bool ready(const SequenceState* target, int& k) const {
    if (k <= 0 || !target || !has_hidden_ || committed_ == 0 || target->length() != committed_) return false;
    k = std::min(k, target->max_tokens() - committed_ - 1);
    return k > 0;
  }
  const float* last_hidden() const { return last_hidden_.data(); }

 private:
  int hidden_;
  int committed_ = 0;
  bool has_hidden_ = false;
  std::vector<float> last_hidden_;
};

class Gemma4AssistantDrafter : public Drafter {
 public:
  Gemma4AssistantDrafter(std::unique_ptr<Gemma4Assistant> assistant, const ModelConfig& target)
      : assistant_(std::move(assistant)), hidden_(target.hidden_size), vocab_(target.vocab_size) {}
  const char* name() const override { return "assistant"; }
  TargetReads reads() const override { return {.post_norm = true, .streams = {}}; }
  std::unique_ptr<DraftSession> new_session(int, const KvOptions&) override {
    return std::make_unique<Gemma4AssistantSession>(hidden_);
  }

  // One assistant step per depth over every sequence still drafting.
  void propose(std::span<const DraftJob> jobs, DraftPasses& passes) override {
    Stopwatch sw;
    rows_.clear();
    active_.start(jobs, [&](const DraftJob& job, int& k) {
      auto& s = *static_cast<Gemma4AssistantSession*>(job.session);
      if (!s.ready(job.target, k)) return false;
      rows_.push_back(AssistantRow{job.target, job.last, s.last_hidden()});
      return true;
    });
    for (int d = 0; !active_.empty(); ++d) {
      const size_t n = active_.size();
      logits_.resize(n * size_t(vocab_));
      next_.resize(n * size_t(hidden_));
      assistant_->step(rows_, logits_.data(), next_.data());
      h_.swap(next_);  // the rows' h for the next depth
      for (size_t i = 0; i < n; ++i) {
        const DraftJob& job = active_[i];
        job.out->tokens.push_back(
            choose_draft(logits_.data() + i * size_t(vocab_), vocab_, *job.sampler, *job.out, work_, order_));
      }
      passes.add(int(n), sw.seconds());
      sw.reset();
      active_.next(d, [&](size_t from, size_t to) {
        const DraftJob& job = active_[to];
        rows_[to] = AssistantRow{job.target, job.out->tokens.back(), h_.data() + from * size_t(hidden_)};
      });
      rows_.resize(active_.size());
    }
  }

 private:
  std::unique_ptr<Gemma4Assistant> assistant_;
  int hidden_, vocab_;
  // One batched call's working set.
  DraftingSet active_;
  std::vector<AssistantRow> rows_;
  std::vector<float> h_, next_, logits_, work_;
  std::vector<int32_t> order_;
};

}  // namespace

std::unique_ptr<Drafter> make_gemma4_assistant_drafter(Model& target, const SpeculativeOptions& options) {
  return std::make_unique<Gemma4AssistantDrafter>(Gemma4Assistant::load(options.assistant_dir, target),
                                                  target.config());
}

}  // namespace nextn
