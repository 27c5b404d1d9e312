// server/backend.h — what the HTTP layer needs from the model side.
// EngineBackend (engine_backend.cc) implements it with the Engine, the tokenizer
// and the chat template; unit tests implement it with a scripted fake so the
// HTTP layer (SSE, errors, cancellation, concurrency) is testable without a model.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_limits.h"
#include "engine/engine.h"
#include "grammar/grammar_constraint.h"

namespace nextn::server {

struct ModelInfo {
  std::string id;            // name clients send as "model"
  std::string path;          // checkpoint directory
  std::string architecture;
  int n_ctx = 0;             // tokens per sequence
  int n_ctx_train = 0;
  int vocab_size = 0;
  int head_dim = 0;          // KV group sizes must divide it
  int parallel = 1;
  int queue_size = 0;        // requests that may wait for a slot (the engine's --queue-size)
  size_t weight_bytes = 0;
  std::string kv_type;       // default KV storage type name
  std::string speculative;   // none | mtp | assistant | draft | ngram
  int num_draft_tokens = 0;
  KvOptions kv;              // default KV options (per-request kv_bits start from these)
  // The model's vision encoder (the engine's; null for a text-only model). Without one,
  // image parts are parsed and decoded (server/request.h), then refused with a 400 naming
  // the model. With one, the images are processed on the request's thread and each
  // image's placeholder token in the rendered prompt expands to the image's tokens.
  const vision::VisionEncoder* vision = nullptr;
};

// Incremental detokenizer with stop strings: push() returns the newly completed
// UTF-8 text; text that may begin a stop string is held back; once a stop string
// is found stopped() is true and the stop text is never emitted.
class TextDecoder {
 public:
  virtual ~TextDecoder() = default;
  virtual std::string push(int32_t token) = 0;
  virtual std::string finish() = 0;  // whatever is still held back
  virtual bool stopped() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const ModelInfo& info() const = 0;

  // Text.
  virtual std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool parse_special) const = 0;
  virtual std::string detokenize(const std::vector<int32_t>& ids) const = 0;
  // The text of one token, for logprobs and /tokenize with_pieces.
  virtual std::string token_text(int32_t id) const = 0;
  virtual std::unique_ptr<TextDecoder> new_decoder(const std::vector<std::string>& stops) const = 0;
  // Renders under `limits` (the server's configured bounds and its shutdown flag).
  virtual std::string apply_chat_template(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                          bool add_generation_prompt, const nlohmann::ordered_json& kwargs,
                                          const jinja::RenderLimits& limits) const = 0;
  virtual std::vector<int32_t> eos_tokens() const = 0;
  // Structured output: the compiled grammars over the model's vocabulary (its byte trie
  // built on first use), shared by every request; null when the backend cannot constrain
  // its output.
  virtual grammar::GrammarCache* grammar_cache() const { return nullptr; }

  // Generation (same contract as Engine).
  virtual uint64_t submit(GenerationRequest request) = 0;
  virtual void cancel(uint64_t id) = 0;
  virtual EngineStats stats() const = 0;
  virtual void shutdown() = 0;
};

// The real backend: loads the engine (slow) and the tokenizer/chat template.
std::unique_ptr<Backend> make_engine_backend(const EngineOptions& options, const std::string& model_id);

}  // namespace nextn::server
