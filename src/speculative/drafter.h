// speculative/drafter.h — the Drafter interface: something that proposes the next k tokens
// of a sequence cheaply so the target can verify them in one batched forward.
// A Drafter is shared by all sequences (it owns weights); each sequence gets a
// DraftSession holding its own state (MTP KV, draft-model KV, n-gram index) that
// follows the target: commit() after rows are accepted, rollback() when the
// target's KV is truncated. Adding a drafter = one file + one line in
// drafter_registry.cc.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "sampling/sampler.h"
#include "speculative/options.h"

namespace nextn {

class Model;

struct DraftProposal {
  std::vector<int32_t> tokens;   // 0..k drafts
  // The distribution each draft was drawn from (size == tokens.size()), or empty
  // when the drafts are deterministic (q one-hot at the draft).
  std::vector<Distribution> q;
  void clear() {
    tokens.clear();
    q.clear();
  }
};

class DraftSession {
 public:
  virtual ~DraftSession() = default;
  // The target committed rows at positions [start, start + tokens.size()):
  // tokens[i] is the token at start+i and hidden (if the drafter needs it) its
  // post-final-norm hidden state, [n, hidden_size]. start == the target's previous
  // committed length; anything the session drafted beyond `start` is discarded.
  virtual void commit(int start, std::span<const int32_t> tokens, const float* hidden) = 0;
  // The target's state returned to n tokens (prefix cache, cancellation).
  virtual void rollback(int n) = 0;
  // Drafts up to k tokens that follow `last` (the token at position committed
  // length, sampled by the target but not yet in its KV). Greedy drafts when
  // sampler.greedy(), else drawn with sampler's params and rng (q filled).
  virtual void propose(int32_t last, int k, Sampler& sampler, DraftProposal& out) = 0;
  // Memory held by the session's caches.
  virtual size_t kv_bytes() const { return 0; }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual const char* name() const = 0;
  // Whether commit() needs the target's hidden states (MTP heads do).
  virtual bool needs_hidden() const = 0;
  virtual std::unique_ptr<DraftSession> new_session(int max_tokens, const KvOptions& kv) = 0;
};

// The next draft from a row of the drafter's logits: the argmax when the sampler is
// greedy, else a draw from the distribution the sampler's parameters make of the row
// (appended to out.q: verification needs q). work and order are scratch memory.
// Shared by every drafter that scores tokens itself (MTP heads, draft models).
int32_t choose_draft(const float* logits, int vocab, Sampler& sampler, DraftProposal& out, std::vector<float>& work,
                     std::vector<int32_t>& order);

// Builds the drafter named by options.mode ("none" → nullptr). Throws
// nextn::Error for unknown modes and incompatible checkpoints.
std::unique_ptr<Drafter> make_drafter(Model& target, const SpeculativeOptions& options);
// Names the registry knows (for messages).
std::vector<std::string> drafter_names();

// One factory per drafter file.
std::unique_ptr<Drafter> make_mtp_drafter(Model& target, const SpeculativeOptions& options);
std::unique_ptr<Drafter> make_assistant_drafter(Model& target, const SpeculativeOptions& options);
std::unique_ptr<Drafter> make_draft_model_drafter(Model& target, const SpeculativeOptions& options);
std::unique_ptr<Drafter> make_ngram_drafter(Model& target, const SpeculativeOptions& options);

}  // namespace nextn
