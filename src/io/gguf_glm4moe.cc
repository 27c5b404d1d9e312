// io/gguf_glm4moe.cc — llama.cpp's `glm4moe` GGUF (GLM-4.5 / 4.5-Air / 4.6): the shared
// decoder reading (gguf_decoder.h) plus the routed layers' keys (expert_count,
// expert_used_count, expert_feed_forward_length, expert_shared_count,
// leading_dense_block_count, expert_weights_scale / _norm, expert_gating_func 2 =
// sigmoid), rope.dimension_count as the partial rotary width, and the q/k/v biases from
// the tensors present. The nextn layer is an ordinary MTP block (gguf_names.cc).
#include "io/gguf_decoder.h"
#include "util/error.h"

namespace nextn {
namespace {

class Glm4MoeDialect : public GgufDecoderDialect {
 public:
  Glm4MoeDialect() : GgufDecoderDialect("glm4moe", "Glm4MoeForCausalLM", "glm4_moe") {}

 protected:
  void family_config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors,
                     nlohmann::json& c) const override {
    c["n_routed_experts"] = md.integer("expert_count");
    c["num_experts_per_tok"] = md.integer("expert_used_count");
    c["moe_intermediate_size"] = md.integer("expert_feed_forward_length");
    c["n_shared_experts"] = md.integer("expert_shared_count", 0);
    c["first_k_dense_replace"] = md.integer("leading_dense_block_count", 0);
    c["routed_scaling_factor"] = md.number("expert_weights_scale", 1.0);
    const std::string norm_key = md.arch() + ".expert_weights_norm";
    const nlohmann::json& kv = md.all();
    c["norm_topk_prob"] = !kv.contains(norm_key) || (kv[norm_key].is_boolean() && kv[norm_key].get<bool>());
    const int64_t gating = md.integer("expert_gating_func", 2);
    if (gating != 2)
      fail(ErrorKind::kUnsupported, "{}: metadata key '{}.expert_gating_func' = {} is not supported (supported: 2, sigmoid)",
           md.path(), md.arch(), gating);
    const int64_t rotary = md.integer("rope.dimension_count", head_dim(c));
    c["partial_rotary_factor"] = double(rotary) / double(head_dim(c));
    c["attention_bias"] = has_q_bias(tensors);
  }
};

}  // namespace

const GgufDialect& gguf_glm4moe_dialect() {
  static const Glm4MoeDialect dialect;
  return dialect;
}

}  // namespace nextn
