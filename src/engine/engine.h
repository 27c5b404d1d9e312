// engine/engine.h — the scheduler: turns generation requests into token streams.
// Owns the target model, the drafter, the slots (one KV cache per concurrent
// sequence), the bounded wait queue and the prefix cache. One engine thread runs
// steps; each step serves every active sequence with one batched forward
// (continuous batching: a new request joins at the next step). Callbacks run on
// the engine thread and must be quick; returning false cancels the request.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "sampling/constraint.h"
#include "sampling/sampler.h"     // SamplingParams
#include "speculative/counters.h"   // SpeculativeCounters
#include "speculative/options.h"    // SpeculativeOptions
#include "vision/encoder.h"       // ProcessedImage, VisionEncoder

namespace nextn {

struct EngineOptions {
  std::string model_dir;
  int threads = 0;          // 0: physical cores
  int parallel = 1;         // concurrent sequences (slots)
  int ctx_size = 4096;      // tokens per slot
  int prefill_size = 512;   // prefill chunk
  int queue_size = 64;      // waiting requests beyond the slots; more get 503
  KvOptions kv;             // default storage type for slots (--turbo-kv etc.)
  SpeculativeOptions speculative;
  LoadOptions load;
  std::string mmproj;              // llama.cpp's vision projector GGUF beside a text GGUF ("": the checkpoint's own tower)
  vision::EncoderOptions vision;   // image token limits
};

// kInvalidRequest: the request cannot go on through its own fault (its grammar passed a
// limit while generating); the error says which.
enum class FinishReason { kNone, kStop, kLength, kCancelled, kError, kInvalidRequest };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", ...

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// How an emitted token came about in its decode step (speculative decoding made
// visible: the server reports it per token when a client asks).
enum class TokenSource : uint8_t {
  kTarget,      // the target's own token in a step without drafts (or the first token)
  kDraft,       // a draft the target accepted
  kCorrection,  // the target's token in place of the first rejected draft
  kBonus,       // the target's token after every draft of the step was accepted
};
const char* token_source_name(TokenSource source);  // "target", "draft", ...

// One emitted token.
struct TokenEvent {
  int32_t token = 0;
  float logprob = 0.0f;                 // when requested
  std::vector<TokenLogprob> top;        // top_logprobs alternatives when requested
  TokenSource source = TokenSource::kTarget;
  int position = 1;                     // 1-based place in its step's tokens (draft k is position k)
  int drafts = 0;                       // drafts the step proposed
};

// What an on_token callback answers. `true` goes on; `false` ends the generation as
// cancelled (the client went away); TokenReply::stop() ends it as finished with `stop`
// (the caller's detokenizer found a stop string).
class TokenReply {
 public:
  TokenReply(bool keep_going) : finish_(keep_going ? FinishReason::kNone : FinishReason::kCancelled) {}
  static TokenReply stop() {
    TokenReply r(false);
    r.finish_ = FinishReason::kStop;
    return r;
  }
  explicit operator bool() const { return finish_ == FinishReason::kNone; }
  FinishReason finish() const { return finish_; }  // kNone while generation goes on

 private:
  FinishReason finish_;
};

struct Timings {
  int prompt_n = 0;           // prompt tokens processed (excluding cache hits)
  int cache_n = 0;            // prompt tokens reused from the prefix cache
  double prompt_ms = 0;       // admission to the first token
  int predicted_n = 0;
  double predicted_ms = 0;
  SpeculativeCounters speculative;    // drafts made and accepted by this request
  std::vector<uint64_t> draft_depths; // decode steps per depth chosen (index: drafts in the step); empty: no drafting
  double draft_ms = 0;        // time spent drafting (inside predicted_ms)
  std::string kv_type;
  double synthetic_accept = -1.0;     // stamped when synthetic acceptance was used
  std::string drafter;                // "mtp", "ngram", ... ("" when no drafting)
  int image_n = 0;                    // pictures in the prompt
  int image_cached_n = 0;             // of which the encoder's rows came from the engine's picture cache
  double image_ms = 0;                // the vision encoder's time at admission (inside prompt_ms)
};

// One image of a prompt (docs/vision.md): as its processor left it, the prompt row of its
// first image token — the n_tokens() placeholder rows from there are the image's, row-major
// over its tokens_h × tokens_w grid — and a hash of its pixels. The engine runs the vision
// encoder's tower on it at admission and puts the rows in place of the placeholders'
// embeddings; a language model with M-RoPE (Qwen3.5) also gets the prompt's 3-axis
// positions (model/mrope.h). The hash keys the prefix cache, so only the same picture
// reuses a cached prefix through its rows.
struct PromptImage {
  vision::ProcessedImage image;
  int row = 0;
  uint64_t hash = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  std::vector<PromptImage> images;  // in prompt order; needs Engine::vision_encoder()
  int max_tokens = 256;
  SamplingParams sampling;
  std::vector<int32_t> stop_tokens;  // end of generation (EOS etc.)
  bool logprobs = false;
  int top_logprobs = 0;
  bool speculative = true;           // per-request switch ("speculative": false)
  int num_draft_tokens = -1;         // -1: engine default; 0: off
  std::optional<KvOptions> kv;       // per-request kv_bits / kv_group_size
  // Structured output (grammar/grammar_constraint.h): every token, drafted or sampled, is
  // one the constraint allows; generation ends with `stop` where it is complete. Used on
  // the engine thread only, from admission on.
  std::shared_ptr<Constraint> constraint;
  // Called for every emitted token, in order (stop tokens end generation and are
  // not emitted). Return false to cancel, TokenReply::stop() to finish with `stop`.
  std::function<TokenReply(const TokenEvent&)> on_token;
  // Called once at the end (also after cancellation or error).
  std::function<void(FinishReason, const Timings&, const std::string& error)> on_done;
};

struct EngineStats {
  uint64_t requests_total = 0, requests_active = 0, requests_queued = 0;
  uint64_t prompt_tokens_total = 0, generated_tokens_total = 0;
  double prompt_seconds_total = 0, decode_seconds_total = 0;
  SpeculativeCounters speculative;  // every request's drafts, summed
  std::vector<uint64_t> draft_depths;  // decode steps of drafting requests per depth (index: drafts in the step)
  // Memory of every slot's sequence state: attention KV (kv_bytes_used also counts the
  // drafters' KV), recurrent state, and the recurrent snapshots kept for rollback.
  size_t kv_bytes_used = 0, kv_bytes_f16_equivalent = 0;
  size_t recurrent_bytes = 0, snapshot_bytes = 0;
  size_t state_bytes_per_sequence_max = 0;  // the largest one slot holds (KV + recurrent + snapshots)
  // Tokens held by the sequences decoding now, out of parallel × ctx_size: the KV use a
  // balancer reads. Idle slots' prefix-cache entries are not counted (they are reusable, not busy).
  uint64_t kv_tokens_active = 0;
};

// Why a prompt cannot be generated from: the one definition of a valid prompt
// (Engine::submit refuses these; the server checks first to name the request field).
struct PromptProblem {
  enum class Kind { kNone, kEmpty, kBadToken, kTooLong };
  Kind kind = Kind::kNone;
  size_t index = 0;   // kBadToken: position of the first id outside the vocabulary
  int32_t token = 0;  // kBadToken: that id
  explicit operator bool() const { return kind != Kind::kNone; }
};
// A prompt must hold at least one token, only ids in [0, vocab_size), and leave room
// for at least one generated token in a context of n_ctx tokens.
PromptProblem find_prompt_problem(std::span<const int32_t> prompt, int n_ctx, int vocab_size);

class Speculator;

class Engine {
 public:
  explicit Engine(const EngineOptions& options);  // loads models; throws nextn::Error
  // With the model and speculator already built (`speculator` drafts for `model`):
  // how the tests give the engine a speculator the options cannot describe.
  Engine(const EngineOptions& options, std::unique_ptr<Model> model, std::unique_ptr<Speculator> speculator);
  ~Engine();                                      // stops the engine thread

  const Model& model() const;
  const EngineOptions& options() const;

  // Thread-safe. Returns a request id; throws nextn::Error(kResource) when the
  // queue is full and nextn::Error(kBadInput) for prompts longer than ctx_size.
  uint64_t submit(GenerationRequest request);
  // The vision encoder (the checkpoint's tower, or --mmproj's); null for a text-only
  // model. Requests may carry images only when there is one.
  const vision::VisionEncoder* vision_encoder() const;
  void cancel(uint64_t id);
  EngineStats stats() const;
  // Stop accepting; finish or cancel in-flight requests; returns when idle.
  void shutdown();

 private:
  struct Impl;
  void start_thread(const EngineOptions& options, std::unique_ptr<Model> model, std::unique_ptr<Speculator> speculator);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nextn
