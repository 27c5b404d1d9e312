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

namespace nextn {
namespace {

class Gemma4AssistantSession : public DraftSession {
 public:
  Gemma4AssistantSession(Gemma4Assistant& assistant, int hidden, int vocab)
      : assistant_(assistant), hidden_(hidden), vocab_(vocab) {}

  void commit(int start, std::span<const int32_t> tokens, const float* hidden) override {
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

  void set_target_state(SequenceState* state) override { target_ = state; }

  void propose(int32_t last, int k, Sampler& sampler, DraftProposal& out) override {
    out.clear();
    // Draft only from the target's current end: its last row produced `last`.
    if (k <= 0 || !target_ || !has_hidden_ || committed_ == 0 || target_->length() != committed_) return;
    k = std::min(k, target_->max_tokens() - committed_ - 1);
    logits_.resize(size_t(vocab_));
    h_ = last_hidden_;
    next_.resize(size_t(hidden_));
    int32_t token = last;
    for (int s = 0; s < k; ++s) {
      assistant_.step(*target_, token, h_.data(), logits_.data(), next_.data());
      token = choose_draft(logits_.data(), vocab_, sampler, out, work_, order_);
      out.tokens.push_back(token);
      h_.swap(next_);
    }
  }

 private:
  Gemma4Assistant& assistant_;
  int hidden_, vocab_;
  SequenceState* target_ = nullptr;
  int committed_ = 0;
  bool has_hidden_ = false;
  std::vector<float> last_hidden_, h_, next_, logits_, work_;
  std::vector<int32_t> order_;
};

class Gemma4AssistantDrafter : public Drafter {
 public:
  Gemma4AssistantDrafter(std::unique_ptr<Gemma4Assistant> assistant, const ModelConfig& target)
      : assistant_(std::move(assistant)), hidden_(target.hidden_size), vocab_(target.vocab_size) {}
  const char* name() const override { return "assistant"; }
  bool needs_hidden() const override { return true; }
  std::unique_ptr<DraftSession> new_session(int, const KvOptions&) override {
    return std::make_unique<Gemma4AssistantSession>(*assistant_, hidden_, vocab_);
  }

 private:
  std::unique_ptr<Gemma4Assistant> assistant_;
  int hidden_, vocab_;
};

}  // namespace

std::unique_ptr<Drafter> make_gemma4_assistant_drafter(Model& target, const SpeculativeOptions& options) {
  return std::make_unique<Gemma4AssistantDrafter>(Gemma4Assistant::load(options.assistant_dir, target),
                                                  target.config());
}

}  // namespace nextn
