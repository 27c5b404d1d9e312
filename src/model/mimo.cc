// model/mimo.cc — MiMoForCausalLM: a Qwen2 backbone (qkv bias) plus MTP layers at
// model.mtp_layers.{i}.* (hidden_layernorm, token_layernorm, input_proj, final_layernorm
// and a Qwen2 decoder block), validated at load.
#include "model/architecture.h"

namespace nextn {

static void configure_mimo(const ConfigReader& reader, const Checkpoint& ckpt, ModelConfig& config) {
  config.qkv_bias = true;
  if (reader.get_bool("use_sliding_window", false))
    reader.error(ErrorKind::kUnsupported, "use_sliding_window = true is not supported");
  parse_rope_scaling(reader, config);
  int layers = reader.has("num_nextn_predict_layers") ? reader.get_int("num_nextn_predict_layers", 0)
                                                      : count_mimo_mtp_layers(ckpt);
  if (layers < 0) reader.error(ErrorKind::kBadInput, "num_nextn_predict_layers must be >= 0, got {}", layers);
  config.num_mtp_layers = layers;
  config.mtp_layout = layers > 0 ? MtpLayout::kMiMo : MtpLayout::kNone;
  if (layers > 0) config.mtp_names = mimo_mtp_names();
}

const Architecture kMiMoArchitecture = {"MiMoForCausalLM", "mimo", configure_mimo};

}  // namespace nextn
