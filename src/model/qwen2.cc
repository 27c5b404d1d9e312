// model/qwen2.cc — Qwen2ForCausalLM: bias on the q/k/v projections.
#include "model/architecture.h"

namespace nextn {

static void configure_qwen2(const ConfigReader& reader, const Checkpoint&, ModelConfig& config) {
  config.qkv_bias = true;
  if (reader.get_bool("use_sliding_window", false))
    reader.error(ErrorKind::kUnsupported, "use_sliding_window = true is not supported");
  parse_rope_scaling(reader, config);
}

const Architecture kQwen2Architecture = {"Qwen2ForCausalLM", "qwen2", configure_qwen2};

}  // namespace nextn
