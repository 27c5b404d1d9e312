// model/gemma4_assistant.h — the Gemma 4 "-assistant" drafter (Gemma4AssistantForCausalLM,
// model_type gemma4_assistant). It has no KV of its own: its query-only layers attend
// over the TARGET's cache of the last non-shared target layer of the same type, always
// at the target's last position p, so drafting leaves nothing to roll back. One step:
//   u = pre_projection([E_target[x] · √H_t ; h])        h: the target's post-norm hidden at p (step 0)
//   u = layers(u) at position p over the target's KV;  n = RMSNorm_w(u; model.norm)
//   logits = E_d · n, centroid-masked: the tokens of the top-k centroids keep their logit,
//            every other token gets min(kept) − 1 (as Hugging Face does: a finite floor, so
//            sampled drafts never pick them and q stays a proper distribution)
//   h_next = post_projection(n)                          fed to the next step
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "state/sequence_state.h"

namespace nextn {

class Model;

// One sequence's draft step in a batched call.
struct AssistantRow {
  SequenceState* target = nullptr;  // its last position p = length() - 1 is the draft position; only read
  int32_t token = 0;                // the token x fed at p
  const float* h = nullptr;         // [target hidden]: the target's post-norm hidden at p, then the step's h_next
};

class Gemma4Assistant {
 public:
  // Whether a drafter's config (model/drafter_config.h) names a Gemma 4 assistant
  // (safetensors, or llama.cpp's gemma4-assistant GGUF).
  static bool is_gemma4_assistant(const nlohmann::json& config);
  // Loads and checks it against `target` (a Gemma 4 model that must outlive it):
  // mismatched hidden size, vocabulary or layer geometry is an error naming both values.
  static std::unique_ptr<Gemma4Assistant> load(const std::string& dir, const Model& target);
  virtual ~Gemma4Assistant() = default;

  // The checkpoint's num_assistant_tokens, else 4.
  virtual int default_draft_tokens() const = 0;
  virtual int num_layers() const = 0;
  // One draft step of every row's sequence in one batch: logits [rows, vocab] and
  // h_next [rows, target hidden] out (each row's h is read before h_next is written).
  virtual void step(std::span<const AssistantRow> rows, float* logits, float* h_next) = 0;
  // One sequence.
  void step(SequenceState& target, int32_t token, const float* h, float* logits, float* h_next) {
    AssistantRow row{&target, token, h};
    step(std::span<const AssistantRow>(&row, 1), logits, h_next);
  }
};

}  // namespace nextn
