// model/config.h — the architecture-independent description of a decoder model,
// parsed from config.json (+ generation_config.json) by the architecture registry.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace nextn {

enum class MtpLayout {
  kNone,
  kMiMo,      // model.mtp_layers.{i}.{hidden_layernorm,token_layernorm,input_proj,final_layernorm,...}; [h; e]
  kDeepSeek,  // model.layers.{L+i}.{enorm,hnorm,eh_proj,shared_head.*,...}; [e; h]
};

struct RopeScaling {
  std::string type;  // "" (none), "llama3", "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture;  // e.g. "Qwen3ForCausalLM"
  std::string model_type;    // e.g. "qwen3"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int max_position_embeddings = 4096;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2 / MiMo
  bool qk_norm = false;   // Qwen3
  MtpLayout mtp_layout = MtpLayout::kNone;
  int num_mtp_layers = 0;
  std::vector<int> eos_token_ids;  // from generation_config.json, else config.json
  int bos_token_id = -1;
};

}  // namespace nextn
