// model/qwen3.cc — Qwen3ForCausalLM: per-head RMSNorm on q and k (q_norm/k_norm),
// explicit head_dim, optional attention_bias.
#include "model/architecture.h"

namespace nextn {

static void configure_qwen3(const ConfigReader& reader, const Checkpoint&, ModelConfig& config) {
  config.qk_norm = true;
  config.qkv_bias = reader.get_bool("attention_bias", false);
  if (reader.get_bool("use_sliding_window", false))
    reader.error(ErrorKind::kUnsupported, "use_sliding_window = true is not supported");
  parse_rope_scaling(reader, config);
}

const Architecture kQwen3Architecture = {"Qwen3ForCausalLM", "qwen3", configure_qwen3};

}  // namespace nextn
