// model/glm4_moe.cc — GLM-4.5 / 4.5-Air / 4.6 (Glm4MoeForCausalLM, model_type glm4_moe):
// pre-norm GQA attention with q/k/v bias (optional q/k norm: use_qk_norm), partial
// rotary (partial_rotary_factor, default 0.5: NeoX on the first half of each head; it
// and rope_theta at the top level or, as newer transformers save them, in rope_parameters),
// plain-w RMSNorm; the first first_k_dense_replace layers have a dense SwiGLU MLP, the
// others a routed one: sigmoid scores, the top-k by score + e_score_correction_bias,
// weights renormalised (norm_topk_prob) and times routed_scaling_factor, plus
// n_shared_experts always-on shared experts (mlp.shared_experts.*). The nextn layer
// (num_nextn_predict_layers, at model.layers.{num_hidden_layers}) is the DeepSeek MTP
// layout over the same kind of layer. Group-limited routing (n_group > 1) is refused.
#include "model/architecture.h"

namespace nextn {

static void configure_glm4_moe(const ConfigReader& reader, const Checkpoint&, ModelConfig& c) {
  c.qkv_bias = reader.get_bool("attention_bias", false);
  c.qk_norm = reader.get_bool("use_qk_norm", false);
  parse_rope_scaling(reader, c);
  // Newer transformers save rope_theta and partial_rotary_factor inside rope_parameters
  // (config.cc reads rope_theta from either place).
  const double partial = rope_parameter(reader, "partial_rotary_factor", 0.5);
  const int rotary = int(c.head_dim * partial);
  if (!(partial > 0 && partial <= 1) || rotary < 2 || rotary % 2 != 0)
    reader.error(ErrorKind::kBadInput, "partial_rotary_factor {} gives {} rotary dims of head_dim {} (need an even number >= 2)",
                 partial, rotary, c.head_dim);
  if (reader.get_int("n_group", 1) > 1 || reader.get_int("topk_group", 1) > 1)
    reader.error(ErrorKind::kUnsupported, "group-limited routing (n_group {}, topk_group {}) is not supported",
                 reader.get_int("n_group", 1), reader.get_int("topk_group", 1));
  const std::string scoring = reader.get_string("scoring_func", "sigmoid");
  if (scoring != "sigmoid")
    reader.error(ErrorKind::kUnsupported, "scoring_func '{}' is not supported (supported: sigmoid)", scoring);

  MlpSpec moe;
  moe.experts = reader.require_int("n_routed_experts");
  moe.top_k = reader.require_int("num_experts_per_tok");
  moe.expert_intermediate = reader.require_int("moe_intermediate_size");
  moe.scoring = RouterScoring::kSigmoid;
  moe.renormalize = reader.get_bool("norm_topk_prob", true);
  moe.routed_scale = float(reader.get_double("routed_scaling_factor", 1.0));
  moe.correction_bias = true;
  const int shared = reader.get_int("n_shared_experts", 1);
  if (moe.experts <= 0 || moe.top_k <= 0 || moe.top_k > moe.experts)
    reader.error(ErrorKind::kBadInput, "num_experts_per_tok ({}) must be in 1..n_routed_experts ({})", moe.top_k,
                 moe.experts);
  if (moe.expert_intermediate <= 0 || shared < 0)
    reader.error(ErrorKind::kBadInput, "moe_intermediate_size ({}) must be positive and n_shared_experts ({}) not negative",
                 moe.expert_intermediate, shared);
  moe.shared_intermediate = shared * moe.expert_intermediate;
  const int first_dense = reader.get_int("first_k_dense_replace", 1);
  if (first_dense < 0 || first_dense > c.num_layers)
    reader.error(ErrorKind::kBadInput, "first_k_dense_replace ({}) must be in 0..num_hidden_layers ({})", first_dense,
                 c.num_layers);

  fill_uniform_layers(c);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerSpec& l = c.layers[size_t(i)];
    l.attention.rotary_dim = rotary;
    if (i >= first_dense) l.mlp = moe;
  }
  c.routed_names.shared = "mlp.shared_experts";
}

const Architecture kGlm4MoeArchitecture = {"Glm4MoeForCausalLM", "glm4_moe", configure_glm4_moe};

}  // namespace nextn
