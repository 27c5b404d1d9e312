// speculative/suffix_drafter.cc — suffix decoding (`--spec-type suffix`): drafts what
// followed the longest earlier occurrence of the text's ending, scored by how often each
// continuation occurred. Two indexes of counted token strings (suffix_index.h) are
// searched: the sequence's own (prompt and output so far) and one per server holding the
// outputs of finished requests (bounded; the oldest leave first), which is where agent
// loops, repeated edits and re-sent tool output pay. The match with the longer suffix
// drafts; how many tokens follows from the match: at most as many as the match is long,
// and only while the continuation's estimated probability stays ≥ kMinProbability. No
// model: the lookup costs microseconds, so even a short draft is nearly free.
#include <algorithm>
#include <deque>
#include <memory>

#include "speculative/drafter.h"
#include "speculative/suffix_index.h"
#include "util/timer.h"

namespace nextn {

namespace {

// An index holds at most kDepth nodes (16 bytes each) per token: 384 bytes, 12 MiB for a
// 32K-token sequence, at most 48 MiB for the server's.
constexpr int kDepth = 24;               // longest string the indexes count
constexpr int kMaxMatch = 16;            // longest suffix looked up (leaves room to draft)
constexpr double kMinProbability = 0.1;  // drafting stops below this estimated probability
constexpr size_t kServerTokens = 1 << 17;  // outputs the per-server index keeps

// The outputs of finished requests, shared by every session of the drafter.
class FinishedOutputs {
 public:
  void add(std::vector<int32_t> output) {
    if (output.empty() || output.size() > kServerTokens) return;
    index_.add(output);
    tokens_ += output.size();
    outputs_.push_back(std::move(output));
    while (tokens_ > kServerTokens) {
      index_.remove(outputs_.front());
      tokens_ -= outputs_.front().size();
      outputs_.pop_front();
    }
  }
  const SuffixIndex& index() const { return index_; }

 private:
  SuffixIndex index_{kDepth};
  std::deque<std::vector<int32_t>> outputs_;
  size_t tokens_ = 0;
};

class SuffixSession : public DraftSession {
 public:
  explicit SuffixSession(std::shared_ptr<FinishedOutputs> finished) : finished_(std::move(finished)) {}

  void commit(int start, std::span<const int32_t> tokens, const TargetRows&) override {
    if (start < int(seq_.size())) rollback(start);
    for (int32_t t : tokens) {
      seq_.push_back(t);
      own_.append(cursor_, t);
    }
  }

  size_t kv_bytes() const override { return own_.bytes(); }

  // The output joins the server's index.
  void request_finished(int prompt_tokens) override {
    if (prompt_tokens < int(seq_.size())) finished_->add(std::vector<int32_t>(seq_.begin() + prompt_tokens, seq_.end()));
  }

  void rollback(int n) override {
    if (n >= int(seq_.size())) return;
    seq_.resize(size_t(n));
    own_.clear();
    cursor_ = {};
    for (int32_t t : seq_) own_.append(cursor_, t);
  }

  void propose(int32_t last, int k, DraftProposal& out) {
    out.clear();
    if (k <= 0) return;
    seq_.push_back(last);  // the text so far ends with the pending token
    const std::span<const int32_t> context(seq_);
    const SuffixIndex::Match own = own_.longest_suffix(context, kMaxMatch);
    const SuffixIndex::Match server = finished_->index().longest_suffix(context, kMaxMatch);
    // The pending token is in neither index, so every match is an earlier occurrence.
    const bool use_own = own.length >= server.length;
    const SuffixIndex::Match& match = use_own ? own : server;
    if (match.length > 0)
      (use_own ? own_ : finished_->index()).continue_match(match, std::min(k, match.length), kMinProbability, out.tokens);
    seq_.pop_back();
  }

 private:
  std::shared_ptr<FinishedOutputs> finished_;
  std::vector<int32_t> seq_;
  SuffixIndex own_{kDepth};
  SuffixIndex::Cursor cursor_;
};

class SuffixDrafter : public Drafter {
 public:
  const char* name() const override { return "suffix"; }
  std::unique_ptr<DraftSession> new_session(int, const KvOptions&) override {
    return std::make_unique<SuffixSession>(finished_);
  }
  // A lookup per sequence: nothing to batch.
  void propose(std::span<const DraftJob> jobs, DraftPasses& passes) override {
    Stopwatch sw;
    for (const DraftJob& job : jobs) static_cast<SuffixSession*>(job.session)->propose(job.last, job.k, *job.out);
    passes.add(int(jobs.size()), sw.seconds());
  }

 private:
  std::shared_ptr<FinishedOutputs> finished_ = std::make_shared<FinishedOutputs>();
};

}  // namespace

std::unique_ptr<Drafter> make_suffix_drafter(Model&, const SpeculativeOptions&) {
  return std::make_unique<SuffixDrafter>();
}

}  // namespace nextn
