// speculative/drafter.h — the Drafter interface: something that proposes the next tokens
// of many sequences cheaply so the target can verify them all in one batched forward.
// A Drafter is shared by all sequences (it owns weights) and drafts for a whole batch
// in one call; each sequence gets a DraftSession holding its own state (MTP KV,
// draft-model KV, n-gram index). Adding a drafter = one file + one line in
// drafter_registry.cc.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "state/sequence_state.h"
#include "sampling/sampler.h"
#include "speculative/options.h"

namespace nextn {

class Model;

struct DraftProposal {
  std::vector<int32_t> tokens;   // 0..k drafts
  // The distribution each draft was drawn from (size == tokens.size()), or empty
  // when the drafts are deterministic (q one-hot at the draft).
  std::vector<Distribution> q;
  // The part of a chained drafter that proposed these drafts (for its counters); null
  // from a single drafter.
  const char* drafter = nullptr;
  void clear() {
    tokens.clear();
    q.clear();
    drafter = nullptr;
  }
};

class DraftSession;

// What a drafter reads from the target's forward for every committed row.
struct TargetReads {
  bool post_norm = false;    // the hidden state after the final norm (MTP heads, assistants)
  std::vector<int> streams;  // residual streams (Model::capture_streams: l is layer l's input)
  bool any() const { return post_norm || !streams.empty(); }
};

// The target's rows of one commit, as the drafter's TargetReads asked (else null).
struct TargetRows {
  const float* post_norm = nullptr;  // [n, hidden_size]
  const float* streams = nullptr;    // [n, streams × hidden_size], streams in TargetReads order
};

// One sequence's part of a batched draft call.
struct DraftJob {
  DraftSession* session = nullptr;   // made by the drafter the job is given to
  int32_t last = 0;                  // the token at the target's committed length, sampled but not in its KV
  int k = 0;                         // drafts wanted (>= 1)
  Sampler* sampler = nullptr;        // greedy: argmax drafts; else drawn with its params and rng (q filled)
  SequenceState* target = nullptr;   // the target's state: drafters that attend over it read it, never change it
  DraftProposal* out = nullptr;      // 0..k drafts that follow `last`
};

// The passes of one batched draft call: pass d ran one forward (or lookup) for
// `sequences[d]` sequences and took `seconds[d]`. The depth planner learns what a draft
// step over b sequences costs from them. A drafter that makes every depth in one forward
// (DFlash) reports the deeper passes at 0 seconds.
struct DraftPasses {
  std::vector<int> sequences;
  std::vector<double> seconds;
  void clear() {
    sequences.clear();
    seconds.clear();
  }
  void add(int b, double s) {
    sequences.push_back(b);
    seconds.push_back(s);
  }
};

// The sequences of a batched draft call that still draft, for drafters that run one
// forward per depth. start() clears every job's proposal and keeps the jobs whose
// session can draft (`ready(job, k)` may lower k); after pass `pass` (0-based), next()
// keeps those that want more than pass + 1 drafts, in order, calling moved(from, to) for
// each so the drafter's per-sequence buffers follow.
class DraftingSet {
 public:
  template <class Ready>
  void start(std::span<const DraftJob> jobs, Ready ready) {
    jobs_.clear();
    depths_.clear();
    for (const DraftJob& job : jobs) {
      job.out->clear();
      int k = job.k;
      if (k > 0 && ready(job, k)) {
        jobs_.push_back(&job);
        depths_.push_back(k);
      }
    }
  }
  template <class Moved>
  void next(int pass, Moved moved) {
    size_t n = 0;
    for (size_t i = 0; i < jobs_.size(); ++i)
      if (depths_[i] > pass + 1) {
        jobs_[n] = jobs_[i];
        depths_[n] = depths_[i];
        moved(i, n++);
      }
    jobs_.resize(n);
    depths_.resize(n);
  }
  size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }
  const DraftJob& operator[](size_t i) const { return *jobs_[i]; }

 private:
  std::vector<const DraftJob*> jobs_;
  std::vector<int> depths_;  // drafts each may make
};

// The state one sequence's drafting keeps between steps (MTP KV, draft-model KV, n-gram
// index). It follows the target: commit() after rows are accepted, rollback() when
// the target's state returns to fewer tokens.
class DraftSession {
 public:
  virtual ~DraftSession() = default;
  // The target committed rows at positions [start, start + tokens.size()):
  // tokens[i] is the token at start+i and row i of `target` what the forward computed
  // there (the drafter's TargetReads). start == the target's previous committed length;
  // anything the session drafted beyond `start` is discarded.
  virtual void commit(int start, std::span<const int32_t> tokens, const TargetRows& target) = 0;
  // The target's state returned to n tokens (prefix cache, cancellation).
  virtual void rollback(int n) = 0;
  // The request the session served ended: its prompt was the first `prompt_tokens`
  // tokens committed, the rest its output. For drafters that learn across requests.
  virtual void request_finished(int prompt_tokens) {}
  // Memory held by the session's caches.
  virtual size_t kv_bytes() const { return 0; }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual const char* name() const = 0;
  // What commit() needs from the target's forward (nothing, by default).
  virtual TargetReads reads() const { return {}; }
  virtual std::unique_ptr<DraftSession> new_session(int max_tokens, const KvOptions& kv) = 0;
  // Drafts for every job at once (sessions made by this drafter). Drafters with a
  // model run one forward per draft depth over every sequence still drafting at that
  // depth, as Model::forward batches the target's rows; `passes` gets one entry per
  // pass. A job may get fewer drafts than asked (none at all: nothing to draft from).
  virtual void propose(std::span<const DraftJob> jobs, DraftPasses& passes) = 0;
};

// The next draft from a row of the drafter's logits: the argmax when the sampler is
// greedy, else a draw from the distribution the sampler's parameters make of the row
// (appended to out.q: verification needs q). work and order are scratch memory.
// Shared by every drafter that scores tokens itself (MTP heads, draft models).
int32_t choose_draft(const float* logits, int vocab, Sampler& sampler, DraftProposal& out, std::vector<float>& work,
                     std::vector<int32_t>& order);

// Builds the drafter named by options.mode ("none" → nullptr; "BASE+TAKEOVER": two
// chained, make_chain_drafter). Throws nextn::Error for unknown modes and incompatible
// checkpoints.
std::unique_ptr<Drafter> make_drafter(Model& target, const SpeculativeOptions& options);
// Names the registry knows (for messages).
std::vector<std::string> drafter_names();

// One factory per drafter file.
std::unique_ptr<Drafter> make_mtp_drafter(Model& target, const SpeculativeOptions& options);
std::unique_ptr<Drafter> make_assistant_drafter(Model& target, const SpeculativeOptions& options);
std::unique_ptr<Drafter> make_draft_model_drafter(Model& target, const SpeculativeOptions& options);
std::unique_ptr<Drafter> make_ngram_drafter(Model& target, const SpeculativeOptions& options);
std::unique_ptr<Drafter> make_suffix_drafter(Model& target, const SpeculativeOptions& options);
std::unique_ptr<Drafter> make_eagle3_drafter(Model& target, const SpeculativeOptions& options);
// `takeover` (a lookup) drafts first; where it finds little, `base` drafts (chain_drafter.cc).
std::unique_ptr<Drafter> make_chain_drafter(std::unique_ptr<Drafter> base, std::unique_ptr<Drafter> takeover);
// DFlash block-diffusion drafters under --draft-model (chosen by make_draft_model_drafter).
std::unique_ptr<Drafter> make_dflash_drafter(Model& target, const SpeculativeOptions& options);
// The most drafts per step `auto` lets the planner choose for the --draft-model in `dir`:
// a DFlash drafter's block_size − 1 (at most kMaxDraftsPerStep), else `fallback`.
int draft_model_max_drafts(const std::string& dir, int fallback);
// Gemma 4 "-assistant" checkpoints under --mtp-assistant-model (chosen by make_assistant_drafter).
std::unique_ptr<Drafter> make_gemma4_assistant_drafter(Model& target, const SpeculativeOptions& options);
// Drafts per step when --num-mtp-tokens is not given for the assistant in `dir`: its
// num_assistant_tokens, else 4 for a Gemma 4 assistant, else `fallback`.
int assistant_default_draft_tokens(const std::string& dir, int fallback);

}  // namespace nextn
