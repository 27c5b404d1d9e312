// model/mtp_head.h — multi-token-prediction layers (MiMo, DeepSeek-V3/GLM "nextn" and
// Qwen3.5 `mtp.*` layouts), loaded from the target checkpoint or from a separate
// assistant checkpoint.
// Row r of a call consumes (h_p, x_{p+1}): the target's post-final-norm hidden state
// at position p (an EAGLE-3 head: a projection of target layer inputs, eagle3_head.cc)
// and the token that followed it, and predicts x_{p+2}. Rows are
// stored in the head's own state (attention KV) at positions state.length() + r (== p), so the
// embedding is zeroed for the row at position 0, as vLLM does.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "state/sequence_state.h"

namespace nextn {

class Model;

// One sequence's rows in a batched head call: row r consumes (hidden[r], tokens[r]) and
// is stored in `state` at position state->length() + r.
struct MtpRows {
  SequenceState* state = nullptr;   // the head's state of the layer being run
  const float* hidden = nullptr;    // [n, hidden_size]: the target's (or the head's own) h per row
  std::span<const int32_t> tokens;  // [n]: the token that followed each row's h
  std::vector<int> logit_rows;      // indices into tokens whose logits are wanted
};

class MtpHead {
 public:
  // A separate checkpoint holding MTP layers: one of the target's own architecture with
  // MTP layers (the split form: llama.cpp's mtp- GGUF, or an MTP-only safetensors
  // directory), or a NextnMTPAssistant (flat config, MiMo or DeepSeek layers). A hidden
  // size or vocabulary other than the target's, or no MTP layers, is an nextn::Error
  // naming the file and both values; a missing tensor names the tensor.
  static std::unique_ptr<MtpHead> load_assistant(const std::string& dir, Model& target);
  // EAGLE-3 drafters (model/eagle3_head.cc): whether a drafter's config
  // (model/drafter_config.h) names one, and loading it from `dir` against `target`
  // (mismatches name the file and both values).
  static bool is_eagle3(const nlohmann::json& config);
  static std::unique_ptr<MtpHead> load_eagle3(const std::string& dir, Model& target);
  virtual ~MtpHead() = default;

  // What a row's h is made from. MTP layers read the target's post-final-norm hidden
  // state as it is (no streams; input_width() == the target's hidden size). A head that
  // reads residual streams (Model::capture_streams; EAGLE-3: the inputs of three target
  // layers) names them, and project_target() turns each committed row's streams
  // [n, streams × target hidden] into its h rows [n, input_width()].
  virtual std::vector<int> target_streams() const { return {}; }
  virtual int input_width() const = 0;
  virtual void project_target(const float* streams, int n, float* h) {
    (void)streams, (void)n, (void)h;
  }
  // The target token of each logit column when the head scores a vocabulary of its own
  // (EAGLE-3's d2t); empty: column i is token i.
  virtual std::span<const int32_t> draft_ids() const { return {}; }

  virtual int num_layers() const = 0;
  virtual MtpLayout layout() const = 0;
  // One attention layer per MTP layer.
  virtual std::unique_ptr<SequenceState> new_state(int max_tokens, const KvOptions& options) const = 0;

  // The output projection of layer `layer` ([vocab, hidden]; the target lm_head or
  // shared_head.head). Drafters use a prefix of its rows for a reduced draft vocabulary.
  virtual WeightMatrix output_head(int layer) const = 0;

  // Runs MTP layer `layer` over the rows of every sequence in one batch (each sequence
  // attends over its own state only), as Model::forward batches target rows.
  // logits: [total logit rows, vocab_rows], sequence after sequence, in each list's order;
  // only the first `vocab_rows` rows of the output projection are applied (0: all, the
  // full vocabulary). hidden_out: [total rows, hidden_size], sequence after sequence: the
  // post-final-norm state recycled as the next step's h.
  virtual void forward(int layer, std::span<const MtpRows> sequences, std::vector<float>& logits,
                       std::vector<float>& hidden_out, int vocab_rows = 0) = 0;

  // One sequence: n = tokens.size() rows, hidden [n, hidden_size]; logits [logit_rows.size(), vocab].
  void forward(int layer, SequenceState& state, const float* hidden, std::span<const int32_t> tokens,
               const std::vector<int>& logit_rows, std::vector<float>& logits, std::vector<float>& hidden_out) {
    MtpRows rows{&state, hidden, tokens, logit_rows};
    forward(layer, std::span<const MtpRows>(&rows, 1), logits, hidden_out);
  }
};

}  // namespace nextn
