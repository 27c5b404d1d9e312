// model/llama.cc — LlamaForCausalLM: no qkv bias, optional rope_scaling (llama3, linear).
#include "model/architecture.h"

namespace nextn {

static void configure_llama(const ConfigReader& reader, const Checkpoint&, ModelConfig& config) {
  if (reader.get_bool("attention_bias", false))
    reader.error(ErrorKind::kUnsupported, "attention_bias = true is not supported for {}", config.architecture);
  if (reader.get_bool("mlp_bias", false))
    reader.error(ErrorKind::kUnsupported, "mlp_bias = true is not supported for {}", config.architecture);
  parse_rope_scaling(reader, config);
}

const Architecture kLlamaArchitecture = {"LlamaForCausalLM", "llama", configure_llama};

}  // namespace nextn
