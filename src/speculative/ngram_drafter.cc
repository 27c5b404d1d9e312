// speculative/ngram_drafter.cc — prompt-lookup drafting: find the most recent earlier
// occurrence of the sequence's last n tokens (n = 4 down to kMinNgram) and propose
// the tokens that followed it. No model; cheap and strong on code and RAG prompts.
#include <algorithm>
#include <unordered_map>

#include "speculative/drafter.h"
#include "util/timer.h"

namespace nextn {

namespace {
constexpr int kMaxNgram = 4;
constexpr int kMinNgram = 1;

uint64_t ngram_key(const int32_t* tokens, int n) {
  uint64_t h = 1469598103934665603ULL ^ uint64_t(n);
  for (int i = 0; i < n; ++i) h = (h ^ uint64_t(uint32_t(tokens[i]))) * 1099511628211ULL;
  return h;
}

class NgramSession : public DraftSession {
 public:
  void commit(int start, std::span<const int32_t> tokens, const TargetRows&) override {
    if (start < int(seq_.size())) rollback(start);
    for (int32_t t : tokens) {
      seq_.push_back(t);
      index_end(int(seq_.size()) - 1);
    }
  }

  void rollback(int n) override {
    if (n >= int(seq_.size())) return;
    seq_.resize(size_t(n));
    for (auto& table : last_end_) table.clear();
    for (int i = 0; i < n; ++i) index_end(i);
  }

  void propose(int32_t last, int k, DraftProposal& out) {
    out.clear();
    if (k <= 0) return;
    seq_.push_back(last);  // the query suffix ends with the pending token
    int len = int(seq_.size());
    for (int n = std::min(kMaxNgram, len - 1); n >= kMinNgram && out.tokens.empty(); --n) {
      auto it = last_end_[n - 1].find(ngram_key(&seq_[size_t(len - n)], n));
      if (it == last_end_[n - 1].end()) continue;
      int end = it->second;  // earlier occurrence ends at `end` (< len - 1)
      if (!std::equal(seq_.begin() + (end - n + 1), seq_.begin() + end + 1, seq_.begin() + (len - n))) continue;
      for (int i = end + 1; i < len && int(out.tokens.size()) < k; ++i) out.tokens.push_back(seq_[size_t(i)]);
    }
    seq_.pop_back();
  }

 private:
  // Indexes every n-gram ending at position i (the latest occurrence wins).
  void index_end(int i) {
    for (int n = 1; n <= kMaxNgram && n <= i + 1; ++n) last_end_[n - 1][ngram_key(&seq_[size_t(i - n + 1)], n)] = i;
  }
  std::vector<int32_t> seq_;
  std::unordered_map<uint64_t, int> last_end_[kMaxNgram];
};

class NgramDrafter : public Drafter {
 public:
  const char* name() const override { return "ngram"; }
  std::unique_ptr<DraftSession> new_session(int, const KvOptions&) override { return std::make_unique<NgramSession>(); }
  // A lookup per sequence: nothing to batch.
  void propose(std::span<const DraftJob> jobs, DraftPasses& passes) override {
    Stopwatch sw;
    for (const DraftJob& job : jobs) static_cast<NgramSession*>(job.session)->propose(job.last, job.k, *job.out);
    passes.add(int(jobs.size()), sw.seconds());
  }
};
}  // namespace

std::unique_ptr<Drafter> make_ngram_drafter(Model&, const SpeculativeOptions&) {
  return std::make_unique<NgramDrafter>();
}

}  // namespace nextn
