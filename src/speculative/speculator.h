// speculative/speculator.h — the speculative step of a whole batch, in one place:
//   plan   a depth per decoding sequence (0 allowed), depth_planner.h, unless fixed;
//   draft  for all sequences together (one drafter call, one forward per depth);
//   verify one target forward over every sequence's rows (and the engine's prefill
//          chunks), then each sequence's rows through verify_rows();
//   return every layer's state to the accepted length (attention KV truncated,
//          recurrent layers to the snapshot of the last accepted row);
//   commit the accepted rows (and prompt chunks) to each sequence's draft session;
//   count  drafts, acceptance and chosen depths, per request and for the engine;
//   learn  the step's costs (cost_model.h).
// The engine (engine/engine.cc) keeps the queue, admission, prefill scheduling and
// emitting the tokens the step returns.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/model.h"
#include "speculative/counters.h"
#include "speculative/depth_planner.h"
#include "speculative/drafter.h"
#include "speculative/options.h"
#include "speculative/step.h"
#include "speculative/verifier.h"

namespace nextn {

// What speculation keeps for one slot: the draft session (it outlives requests, so a
// prefix-cache hit keeps what the drafter saw) and the current request's record.
struct SequenceSpeculation {
  std::unique_ptr<DraftSession> session;
  int session_len = 0;            // target rows the session has seen
  int limit = 0;                  // this request's most drafts per step (0: it does not draft)
  AcceptanceEstimate acceptance;  // this request's acceptance per draft position
  SpeculativeCounters counters;   // this request's drafts and acceptance
  std::vector<uint64_t> depths;   // this request's decode steps per depth (index: drafts in the step)
  double draft_seconds = 0;       // this request's share of drafting time
};

// One sequence's part of a step: the engine fills the inputs, the step the results.
struct StepSequence {
  SequenceState* state = nullptr;
  SequenceSpeculation* spec = nullptr;
  Sampler* sampler = nullptr;
  // Prefill: a prompt chunk appended at state->length(); `last_chunk` asks for the
  // scores of its last row.
  std::span<const int32_t> prefill;
  bool last_chunk = false;
  // Image prompts (SequenceRows): the chunk's rows from outside the embedding and its
  // (t, h, w) positions; every row's rope_delta once the prompt is in (decode, verify).
  std::vector<EmbeddingSpan> embeddings;
  std::span<const int32_t> positions;
  int position_offset = 0;
  // Decode: the token emitted last (not yet in the state), and the most drafts this
  // step may carry for it (tokens left to generate, room in the context).
  int32_t last = 0;
  int room = 0;
  // Results. Decode: `tokens` the accepted drafts then the target's token, row i of
  // `logits` the scores tokens[i] was chosen from. Prefill: `logits` the last row's
  // scores (last_chunk).
  StepTokens tokens;
  int drafts = 0;                  // drafts verified
  const float* logits = nullptr;
  bool decoding() const { return prefill.empty(); }
};

// What a step adds to the engine's totals.
struct StepReport {
  SpeculativeCounters counters;
  std::vector<uint64_t> depths;  // decode steps per depth
};

class Speculator {
 public:
  // `max_sequences`: the engine's slots. With an adaptive depth the forward costs are
  // measured here (calibrate).
  // `on_reject`: what replaces a rejected draft; null (always, in the product) is the
  // lossless rule — the distribution tests construct one with a wrong rule.
  // Throws nextn::Error when the drafter cannot be built.
  Speculator(Model& target, const SpeculativeOptions& options, int max_sequences, RejectionRule on_reject = nullptr);
  ~Speculator();

  const Drafter* drafter() const { return drafter_.get(); }
  bool adaptive() const { return options_.adaptive; }

  // A request starts in a slot whose state holds `kept` tokens of its prompt (a
  // prefix-cache hit, already returned to). `request_depth`: the request's own bound
  // (< 0: the engine's, 0: no drafting). `max_tokens` sizes a new draft session.
  void start(SequenceSpeculation& spec, int request_depth, int max_tokens, const KvOptions& kv);
  // The longest prefix of `n` cached tokens the slot's drafter can resume from.
  int reusable_prefix(const SequenceSpeculation& spec, int n) const;
  // The slot's target state returned to n tokens (prefix cache).
  void return_to(SequenceSpeculation& spec, int n);
  // Forgets the session (the slot's state is unknown after an error).
  void reset(SequenceSpeculation& spec);
  // The slot's request ended (its prompt: the first `prompt_tokens` tokens).
  void finish(SequenceSpeculation& spec, int prompt_tokens);

  // One step over the whole batch (see the header comment). The results are valid until
  // the next step.
  StepReport step(std::span<StepSequence> batch);

  // Measures the target forward of one sequence and of `max_sequences` sequences, each
  // over 1 .. deepest draft + 1 rows (bounded by `budget_seconds`), to seed the cost
  // model before the first request.
  void calibrate(int max_sequences, double budget_seconds);

 private:
  struct Impl;
  SpeculativeOptions options_;
  std::unique_ptr<Drafter> drafter_;
  TargetReads reads_;  // what the drafter reads from the target's forward
  std::unique_ptr<Impl> impl_;
};

}  // namespace nextn
