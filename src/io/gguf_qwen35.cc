// io/gguf_qwen35.cc — llama.cpp's `qwen35` (Qwen3.5/3.6 dense hybrid) and `qwen35moe`
// (its routed form, e.g. Qwen3.6-35B-A3B) GGUF: the shared decoder reading
// (gguf_decoder.h) with the converter's rewrites undone where they are cheap: norms
// stored as 1 + w back to w (all but ssm_norm), ssm_a = -exp(A_log) back to A_log, the
// squeezed conv [channels, K] back to [channels, 1, K], the MTP block blk.{n_layer}.*
// renamed to mtp.*. The tiled value-head order is kept and named in the config
// (linear_value_head_order: tiled), since a column permutation of ssm_out would cut
// K-quant blocks. Keys: ssm.* (state_size = dk, group_count = Hk, time_step_rank = Hv,
// inner_size = Hv·dv, conv_kernel), full_attention_interval, rope.dimension_count as the
// partial rotary width; qwen35moe: expert_* with llama.cpp's fixed softmax router and
// renormalised top-k (keys saying otherwise are refused) and the shared expert's width.
#include <cmath>

#include "io/gguf_decoder.h"
#include "util/error.h"

namespace nextn {
namespace {

// A qwen35 MTP tensor at layer index n_layers + i → its Hugging Face mtp.* name; other
// names unchanged.
std::string mtp_name(const std::string& hf, int64_t n_layers) {
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) != 0) return hf;
  const size_t dot = hf.find('.', prefix.size());
  const int64_t layer = std::stoll(hf.substr(prefix.size(), dot - prefix.size()));
  if (layer < n_layers) return hf;
  const std::string rest = hf.substr(dot + 1);
  if (rest == "enorm.weight") return "mtp.pre_fc_norm_embedding.weight";
  if (rest == "hnorm.weight") return "mtp.pre_fc_norm_hidden.weight";
  if (rest == "eh_proj.weight") return "mtp.fc.weight";
  if (rest == "shared_head.norm.weight") return "mtp.norm.weight";
  return "mtp.layers." + std::to_string(layer - n_layers) + "." + rest;
}

// f(x) of every element of a 1-D F32/F16/BF16 tensor, as a new F32 tensor.
template <typename F>
std::unique_ptr<uint8_t[]> map_floats(const TensorView& t, F f) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
    fail(ErrorKind::kUnsupported, "{}: tensor '{}' must be F32, F16 or BF16 (llama.cpp writes it F32)", t.file, t.name);
  const int64_t n = t.numel();
  auto out = std::make_unique<uint8_t[]>(size_t(n) * sizeof(float));
  float* y = reinterpret_cast<float*>(out.get());
  for (int64_t i = 0; i < n; ++i) y[i] = f(t.float_at(i));
  return out;
}

class Qwen35Dialect : public GgufDecoderDialect {
 public:
  Qwen35Dialect(const char* arch, const char* hf_architecture, const char* model_type, bool routed)
      : GgufDecoderDialect(arch, hf_architecture, model_type), routed_(routed) {}

  TensorView read_tensor(const TensorView& t, const std::string& hf, const GgufMetadata& md,
                         std::vector<std::unique_ptr<uint8_t[]>>& owned) const override {
    TensorView view = GgufDecoderDialect::read_tensor(t, mtp_name(hf, decoder_layers(md)), md, owned);
    const bool shifted_norm = t.name.ends_with("norm.weight") && !t.name.ends_with(".ssm_norm.weight");
    const bool neg_exp_a = t.name.ends_with(".ssm_a");
    if (shifted_norm || neg_exp_a) {
      if (neg_exp_a)
        for (int64_t i = 0; i < t.numel(); ++i)
          if (!(t.float_at(i) < 0.0f))
            fail(ErrorKind::kBadInput, "{}: tensor '{}' must hold -exp(A_log) < 0, element {} is {}", t.file, t.name, i,
                 t.float_at(i));
      owned.push_back(shifted_norm ? map_floats(t, [](float w) { return w - 1.0f; })
                                   : map_floats(t, [](float a) { return std::log(-a); }));
      view.data = owned.back().get();
      view.dtype = DType::kF32;
      view.nbytes = size_t(t.numel()) * sizeof(float);
    }
    if (t.name.ends_with(".ssm_conv1d.weight")) {
      if (t.shape.size() != 2)
        fail(ErrorKind::kBadInput, "{}: tensor '{}' must be 2-D [channels, kernel], got {}", t.file, t.name,
             t.shape_string());
      view.shape = {t.shape[0], 1, t.shape[1]};
    }
    return view;
  }

 protected:
  const char* mtp_key() const override { return "mtp_num_hidden_layers"; }
  bool dense_mlp_required() const override { return !routed_; }

  void family_config(const GgufMetadata& md, const std::map<std::string, const TensorView*>&,
                     nlohmann::json& c) const override {
    const std::string& path = md.path();
    const std::string& arch = md.arch();
    if (routed_) {
      // Every layer routed (llama.cpp's loader requires ffn_gate_inp in each): softmax over
      // all experts, top-k renormalised, a shared expert of its own width with a sigmoid
      // gate. llama.cpp fixes the softmax and the renormalisation for this architecture;
      // the keys that would say otherwise are refused.
      c["num_experts"] = md.integer("expert_count");
      c["num_experts_per_tok"] = md.integer("expert_used_count");
      c["moe_intermediate_size"] = md.integer("expert_feed_forward_length");
      c["shared_expert_intermediate_size"] = md.integer("expert_shared_feed_forward_length");
      const int64_t gating = md.integer("expert_gating_func", 1);
      if (gating != 1)
        fail(ErrorKind::kUnsupported, "{}: metadata key '{}.expert_gating_func' = {} is not supported (supported: 1, "
             "softmax)", path, arch, gating);
      const std::string norm_key = arch + ".expert_weights_norm";
      const nlohmann::json& kv = md.all();
      if (kv.contains(norm_key) && !(kv[norm_key].is_boolean() && kv[norm_key].get<bool>()))
        fail(ErrorKind::kUnsupported, "{}: metadata key '{}' must be true (llama.cpp renormalises the top-k weights)",
             path, norm_key);
      const double scale = md.number("expert_weights_scale", 1.0);
      if (scale != 0.0 && scale != 1.0)
        fail(ErrorKind::kUnsupported, "{}: metadata key '{}.expert_weights_scale' = {} is not supported (supported: 1)",
             path, arch, scale);
      c["norm_topk_prob"] = true;
    }
    // Gated DeltaNet widths, the layer pattern, and the partial rotary width.
    c["linear_conv_kernel_dim"] = md.integer("ssm.conv_kernel");
    c["linear_key_head_dim"] = md.integer("ssm.state_size");
    c["linear_num_key_heads"] = md.integer("ssm.group_count");
    const int64_t value_heads = md.integer("ssm.time_step_rank");
    const int64_t inner = md.integer("ssm.inner_size");
    if (value_heads <= 0 || inner <= 0 || inner % value_heads != 0)
      fail(ErrorKind::kBadInput, "{}: metadata key '{}.ssm.inner_size' ({}) must be a positive multiple of "
           "'{}.ssm.time_step_rank' ({})", path, arch, inner, arch, value_heads);
    c["linear_num_value_heads"] = value_heads;
    c["linear_value_head_dim"] = inner / value_heads;
    c["linear_value_head_order"] = "tiled";
    c["full_attention_interval"] = md.integer("full_attention_interval");
    c["partial_rotary_factor"] = double(md.integer("rope.dimension_count")) / double(head_dim(c));
    c["attn_output_gate"] = true;
    // M-RoPE: llama.cpp writes [t, h, w, 0] sections and rotates them interleaved, as
    // Qwen3.5 does; text alone gives every axis one position, so it is plain RoPE then.
    if (md.has("rope.dimension_sections")) {
      const std::vector<int64_t> sec = md.per_layer("rope.dimension_sections", 4);
      c["rope_parameters"] = {{"rope_type", "default"},
                              {"rope_theta", c["rope_theta"]},
                              {"mrope_section", {sec[0], sec[1], sec[2]}},
                              {"mrope_interleaved", true}};
    }
    // The image prompt's tokens, which the converter keeps only as vocabulary (an image
    // needs a vision projector GGUF beside this file: --mmproj).
    for (const auto& [key, text] : {std::pair{"image_token_id", "<|image_pad|>"},
                                    std::pair{"vision_start_token_id", "<|vision_start|>"},
                                    std::pair{"vision_end_token_id", "<|vision_end|>"}})
      if (const int64_t id = md.token_id(text); id >= 0) c[key] = id;
  }

 private:
  bool routed_;
};

}  // namespace

const GgufDialect& gguf_qwen35_dialect() {
  static const Qwen35Dialect dialect("qwen35", "Qwen3_5ForCausalLM", "qwen3_5_text", false);
  return dialect;
}

const GgufDialect& gguf_qwen35moe_dialect() {
  static const Qwen35Dialect dialect("qwen35moe", "Qwen3_5MoeForCausalLM", "qwen3_5_moe_text", true);
  return dialect;
}

}  // namespace nextn
