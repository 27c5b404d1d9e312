// model/mtp_head.h — multi-token-prediction layers (MiMo, DeepSeek-V3/GLM "nextn" and
// Qwen3.5 `mtp.*` layouts), loaded from the target checkpoint or from a separate
// assistant checkpoint.
// Row r of a call consumes (h_p, x_{p+1}): the target's post-final-norm hidden state
// at position p and the token that followed it, and predicts x_{p+2}. Rows are
// stored in the head's own state (attention KV) at positions state.length() + r (== p), so the
// embedding is zeroed for the row at position 0, as vLLM does.
#pragma once
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

class MtpHead {
 public:
  // A checkpoint that holds only MTP layers (config names the target's hidden size
  // and vocabulary; a mismatch is an nextn::Error naming both values).
  static std::unique_ptr<MtpHead> load_assistant(const std::string& dir, Model& target);
  virtual ~MtpHead() = default;

  virtual int num_layers() const = 0;
  virtual MtpLayout layout() const = 0;
  // One attention layer per MTP layer.
  virtual std::unique_ptr<SequenceState> new_state(int max_tokens, const KvOptions& options) const = 0;

  // The output projection of layer `layer` ([vocab, hidden]; the target lm_head or
  // shared_head.head). Drafters use a prefix of its rows for a reduced draft vocabulary.
  virtual WeightMatrix output_head(int layer) const = 0;

  // Runs MTP layer `layer` over n = tokens.size() rows. hidden: [n, hidden_size].
  // logits: [logit_rows.size(), vocab]; hidden_out: [n, hidden_size], the state
  // recycled as the next step's h (post final norm).
  virtual void forward(int layer, SequenceState& state, const float* hidden, std::span<const int32_t> tokens,
                       const std::vector<int>& logit_rows, std::vector<float>& logits,
                       std::vector<float>& hidden_out) = 0;
};

}  // namespace nextn
