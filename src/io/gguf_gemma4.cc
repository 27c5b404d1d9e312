// io/gguf_gemma4.cc — Gemma 4 text models in llama.cpp's `gemma4` GGUF layout, as its
// converter (Gemma4Model, a Gemma3Model without the 1 + w norm shift) writes them:
//   - names: the Gemma 2/3 sandwich norms (ffn_norm = pre_feedforward_layernorm,
//     post_attention_norm, post_ffw_norm), layer_output_scale = layer_scalar, the
//     per-layer-embedding trio inp_gate / proj / post_norm and the globals
//     per_layer_token_embd / per_layer_model_proj / per_layer_proj_norm; the 26B-A4B
//     experts as ffn_gate_up_exps (gate and up fused, gate first) / ffn_down_exps, the
//     router ffn_gate_inp (+ .scale) and the per-expert scale as ffn_down_exps.scale;
//   - metadata: key_length / value_length are the full layers' head dim, *_swa the
//     sliding layers'; attention.sliding_window_pattern one boolean per layer;
//     feed_forward_length per layer when the KV-sharing layers are double wide;
//     head_count_kv per layer when num_global_key_value_heads is set;
//     attention.shared_kv_layers, embedding_length_per_layer_input,
//     final_logit_softcapping, rope.freq_base (full) / rope.freq_base_swa (sliding);
//   - rope_freqs [global_head_dim / 2]: the "proportional" RoPE of the full layers as
//     frequency divisors, 1 for the rotated pairs and 1e30 for the rest (ggml's NeoX
//     rotation over the whole head, rope.dimension_count = global_head_dim);
//   - tokenizer: a SentencePiece-style vocabulary as tokenizer.ggml.model "gemma4" (its
//     merges stored, no ▁ prepended; read in tokenizer/gguf_spm.cc).
// Vision and audio towers are not part of the text GGUF.
#include <algorithm>
#include <cmath>

#include "io/gguf_dialect.h"
#include "io/gguf_names.h"
#include "io/json_file.h"
#include "util/error.h"

namespace nextn {
namespace {

struct NamePair {
  const char* gguf;  // after "blk.N." (or the whole name for globals)
  const char* hf;    // after "model.layers.N." (or after "model.")
};

constexpr NamePair kGlobal[] = {
    {"token_embd.weight", "embed_tokens.weight"},
    {"output_norm.weight", "norm.weight"},
    {"per_layer_token_embd.weight", "embed_tokens_per_layer.weight"},
    {"per_layer_model_proj.weight", "per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "per_layer_projection_norm.weight"},
};

constexpr NamePair kBlock[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
    {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
    {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
    {"ffn_gate_inp.weight", "router.proj.weight"},
    {"ffn_gate_inp.scale", "router.scale"},
    {"ffn_down_exps.scale", "router.per_expert_scale"},
    {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},
    {"ffn_down_exps.weight", "experts.down_proj"},
};

// rope_parameters.<type> of a Hugging Face text config ({} when absent).
nlohmann::json rope_of(const nlohmann::json& c, const char* type) {
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object() && c["rope_parameters"].contains(type) &&
      c["rope_parameters"][type].is_object())
    return c["rope_parameters"][type];
  return nlohmann::json::object();
}

int64_t require_int(const nlohmann::json& c, const char* key) {
  if (!c.contains(key) || !c[key].is_number_integer())
    fail(ErrorKind::kBadInput, "quantize: Gemma 4 config needs integer '{}' for GGUF", key);
  return c[key].get<int64_t>();
}

// The number of rotated pairs of a full layer under "proportional" RoPE.
int64_t rotated_pairs(const nlohmann::json& c) {
  const nlohmann::json full = rope_of(c, "full_attention");
  const int64_t d = require_int(c, "global_head_dim");
  if (full.value("rope_type", "default") != "proportional") return d / 2;
  return int64_t(double(d) * full.value("partial_rotary_factor", 1.0) / 2.0);
}

class Gemma4Dialect : public GgufDialect {
 public:
  std::string arch() const override { return "gemma4"; }
  bool writes(const std::string& a) const override {
    return a == "Gemma4ForCausalLM" || a == "Gemma4ForConditionalGeneration";
  }

  std::string hf_name(const std::string& g) const override {
    for (const NamePair& p : kGlobal)
      if (g == p.gguf) return std::string("model.") + p.hf;
    if (g == "output.weight") return "lm_head.weight";
    std::string layer, rest;
    if (!split_layer_name(g, "blk.", layer, rest)) return "";
    for (const NamePair& p : kBlock)
      if (rest == p.gguf) return "model.layers." + layer + "." + p.hf;
    return "";
  }

  std::string gguf_name(const std::string& hf) const override {
    if (hf == "lm_head.weight") return "output.weight";
    std::string name;
    for (const char* prefix : {"model.language_model.", "model."})
      if (hf.compare(0, std::string(prefix).size(), prefix) == 0) {
        name = hf.substr(std::string(prefix).size());
        break;
      }
    for (const NamePair& p : kGlobal)
      if (name == p.hf) return p.gguf;
    std::string layer, rest;
    if (!split_layer_name(name, "layers.", layer, rest)) return "";
    for (const NamePair& p : kBlock)
      if (rest == p.hf) return "blk." + layer + "." + p.gguf;
    return "";
  }

  nlohmann::json config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors) const override {
    const std::string& path = md.path();
    auto tensor = [&](const std::string& name) -> const TensorView* {
      auto it = tensors.find(name);
      return it == tensors.end() ? nullptr : it->second;
    };
    auto unsupported = [&](const std::string& what) { fail(ErrorKind::kUnsupported, "{}: gemma4: {}", path, what); };
    nlohmann::json c = nlohmann::json::object();
    c["architectures"] = nlohmann::json::array({"Gemma4ForCausalLM"});
    c["model_type"] = "gemma4_text";
    c["hidden_activation"] = "gelu_pytorch_tanh";
    const int64_t n = md.integer("block_count");
    if (n <= 0) fail(ErrorKind::kBadInput, "{}: metadata key 'gemma4.block_count' must be positive", path);
    c["num_hidden_layers"] = n;
    c["hidden_size"] = md.integer("embedding_length");
    c["rms_norm_eps"] = md.number("attention.layer_norm_rms_epsilon", 1e-6);
    c["max_position_embeddings"] = md.integer("context_length", 131072);

    const std::vector<int64_t> heads = md.per_layer("attention.head_count", n);
    if (std::any_of(heads.begin(), heads.end(), [&](int64_t h) { return h != heads[0]; }))
      unsupported("a different attention.head_count per layer");
    c["num_attention_heads"] = heads[0];

    // Layer kinds, and per kind: head dim, key/value heads, whether K = V.
    const std::vector<bool> sliding = md.flags("attention.sliding_window_pattern", n);
    nlohmann::json types = nlohmann::json::array();
    for (bool s : sliding) types.push_back(s ? "sliding_attention" : "full_attention");
    c["layer_types"] = types;
    const int64_t global_dim = md.integer("attention.key_length");
    const int64_t local_dim = md.integer("attention.key_length_swa", global_dim);
    if (md.integer("attention.value_length", global_dim) != global_dim ||
        md.integer("attention.value_length_swa", local_dim) != local_dim)
      unsupported("value heads of another width than the key heads");
    c["global_head_dim"] = global_dim;
    c["head_dim"] = local_dim;
    const int64_t shared = md.integer("attention.shared_kv_layers", 0);
    if (shared < 0 || shared >= n)
      fail(ErrorKind::kBadInput, "{}: metadata key 'gemma4.attention.shared_kv_layers' ({}) must be in 0..{}", path,
           shared, n - 1);
    c["num_kv_shared_layers"] = shared;
    const std::vector<int64_t> kv = md.per_layer("attention.head_count_kv", n);
    int64_t local_kv = -1, global_kv = -1;
    int k_eq_v = -1;  // unknown until a full layer with its own KV is seen
    for (int64_t i = 0; i < n; ++i) {
      int64_t& want = sliding[size_t(i)] ? local_kv : global_kv;
      if (want >= 0 && want != kv[size_t(i)]) unsupported("different key/value head counts among layers of one kind");
      want = kv[size_t(i)];
      if (!sliding[size_t(i)] && i < n - shared) {
        const std::string blk = "blk." + std::to_string(i) + ".";
        if (!tensor(blk + "attn_k.weight")) fail(ErrorKind::kBadInput, "{}: missing tensor '{}attn_k.weight'", path, blk);
        const int own_v = tensor(blk + "attn_v.weight") ? 0 : 1;
        if (k_eq_v >= 0 && k_eq_v != own_v) unsupported("some full layers with attn_v and some without");
        k_eq_v = own_v;
      }
    }
    c["num_key_value_heads"] = local_kv >= 0 ? local_kv : global_kv;
    if (k_eq_v == 1) {
      c["attention_k_eq_v"] = true;
      c["num_global_key_value_heads"] = global_kv;
    } else if (global_kv >= 0 && local_kv >= 0 && global_kv != local_kv) {
      unsupported("full layers with their own values and another key/value head count than the sliding layers");
    }

    // Dense MLP widths: the KV-sharing layers may be double wide.
    const std::vector<int64_t> ff = md.per_layer("feed_forward_length", n);
    const int64_t base = ff[0];
    bool double_wide = shared > 0 && ff[size_t(n - 1)] == 2 * base;
    for (int64_t i = 0; i < n; ++i)
      if (ff[size_t(i)] != (double_wide && i >= n - shared ? 2 * base : base))
        unsupported("feed_forward_length " + json_text(ff[size_t(i)]) + " at layer " + std::to_string(i) +
                    " (only the KV-sharing layers may be double wide)");
    c["intermediate_size"] = base;
    c["use_double_wide_mlp"] = double_wide;
    c["sliding_window"] = md.integer("attention.sliding_window", 512);

    // RoPE: sliding layers rotate the whole head; the full layers' proportional form
    // comes back from rope_freqs.
    if (md.integer("rope.dimension_count_swa", local_dim) != local_dim)
      unsupported("partial RoPE on the sliding layers (rope.dimension_count_swa != key_length_swa)");
    if (md.integer("rope.dimension_count", global_dim) != global_dim)
      unsupported("rope.dimension_count other than key_length (llama.cpp writes proportional RoPE through rope_freqs)");
    double partial = 1.0;
    if (const TensorView* f = tensor("rope_freqs.weight")) {
      if (f->shape != std::vector<int64_t>{global_dim / 2} ||
          (f->dtype != DType::kF32 && f->dtype != DType::kF16 && f->dtype != DType::kBF16))
        fail(ErrorKind::kBadInput, "{}: tensor 'rope_freqs.weight' must be a float vector of {} (key_length / 2), got {}",
             path, global_dim / 2, f->shape_string());
      int64_t rotated = 0;
      while (rotated < f->shape[0] && f->float_at(rotated) == 1.0f) ++rotated;
      for (int64_t j = rotated; j < f->shape[0]; ++j)
        if (!(f->float_at(j) >= 1e20f))
          unsupported("rope_freqs factor " + json_text(f->float_at(j)) + " at pair " + std::to_string(j) +
                      " (supported: 1 for the rotated pairs, then >= 1e20 for the rest)");
      if (rotated == 0) unsupported("rope_freqs with no rotated pair");
      partial = 2.0 * double(rotated) / double(global_dim);
    }
    c["rope_parameters"] = {
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", md.number("rope.freq_base_swa", 1e4)}}},
        {"full_attention",
         {{"rope_type", "proportional"}, {"partial_rotary_factor", partial}, {"rope_theta", md.number("rope.freq_base", 1e6)}}}};
    if (md.has("final_logit_softcapping")) c["final_logit_softcapping"] = md.number("final_logit_softcapping", 0.0);

    const TensorView* embed = tensor("token_embd.weight");
    if (!embed || embed->shape.size() != 2) fail(ErrorKind::kBadInput, "{}: missing 2-D tensor 'token_embd.weight'", path);
    c["vocab_size"] = embed->shape[0];
    c["tie_word_embeddings"] = tensor("output.weight") == nullptr;
    const int64_t ple = md.integer("embedding_length_per_layer_input", 0);
    c["hidden_size_per_layer_input"] = ple;
    if (ple > 0) {
      const TensorView* table = tensor("per_layer_token_embd.weight");
      if (!table || table->shape.size() != 2)
        fail(ErrorKind::kBadInput, "{}: missing 2-D tensor 'per_layer_token_embd.weight'", path);
      c["vocab_size_per_layer_input"] = table->shape[0];
    }
    // The image prompt's tokens: the converter keeps them only as vocabulary (an image
    // needs the vision projector GGUF beside this file: --mmproj); images take the pad
    // token's per-layer row.
    for (const auto& [key, text] : {std::pair{"image_token_id", "<|image|>"}, std::pair{"boi_token_id", "<|image>"},
                                    std::pair{"eoi_token_id", "<image|>"}})
      if (const int64_t id = md.token_id(text); id >= 0) c[key] = id;
    if (md.all().contains("tokenizer.ggml.padding_token_id") && md.all()["tokenizer.ggml.padding_token_id"].is_number_integer())
      c["pad_token_id"] = md.all()["tokenizer.ggml.padding_token_id"];
    if (md.integer("expert_count", 0) > 0) {
      c["enable_moe_block"] = true;
      c["num_experts"] = md.integer("expert_count");
      c["top_k_experts"] = md.integer("expert_used_count");
      c["moe_intermediate_size"] = md.integer("expert_feed_forward_length");
    }
    return c;
  }

  void write_metadata(const nlohmann::json& c, GgufWriter& w) const override {
    const std::string a = arch() + ".";
    const int64_t n = require_int(c, "num_hidden_layers");
    if (!c.contains("layer_types") || !c["layer_types"].is_array() || int64_t(c["layer_types"].size()) != n)
      fail(ErrorKind::kBadInput, "quantize: Gemma 4 config needs layer_types (one per layer) for GGUF");
    std::vector<bool> sliding;
    for (const auto& t : c["layer_types"]) sliding.push_back(t == "sliding_attention");
    const int64_t shared = c.value("num_kv_shared_layers", 0);
    const int64_t inter = require_int(c, "intermediate_size");
    const int64_t kv = require_int(c, "num_key_value_heads");
    const int64_t head_dim = require_int(c, "head_dim"), global_dim = require_int(c, "global_head_dim");

    w.set_u32(a + "block_count", uint32_t(n));
    w.set_u32(a + "context_length", uint32_t(c.value("max_position_embeddings", 131072)));
    w.set_u32(a + "embedding_length", uint32_t(require_int(c, "hidden_size")));
    w.set_u32(a + "attention.head_count", uint32_t(require_int(c, "num_attention_heads")));
    if (c.contains("num_global_key_value_heads") && c["num_global_key_value_heads"].is_number_integer()) {
      std::vector<int32_t> per_layer;
      for (bool s : sliding) per_layer.push_back(int32_t(s ? kv : c["num_global_key_value_heads"].get<int64_t>()));
      w.set_i32s(a + "attention.head_count_kv", per_layer);
    } else {
      w.set_u32(a + "attention.head_count_kv", uint32_t(kv));
    }
    if (c.value("use_double_wide_mlp", false)) {
      std::vector<int32_t> per_layer;
      for (int64_t i = 0; i < n; ++i) per_layer.push_back(int32_t(i >= n - shared ? 2 * inter : inter));
      w.set_i32s(a + "feed_forward_length", per_layer);
    } else {
      w.set_u32(a + "feed_forward_length", uint32_t(inter));
    }
    w.set_f32(a + "attention.layer_norm_rms_epsilon", float(c.value("rms_norm_eps", 1e-6)));
    w.set_u32(a + "attention.key_length", uint32_t(global_dim));
    w.set_u32(a + "attention.value_length", uint32_t(global_dim));
    w.set_u32(a + "attention.key_length_swa", uint32_t(head_dim));
    w.set_u32(a + "attention.value_length_swa", uint32_t(head_dim));
    w.set_u32(a + "attention.sliding_window", uint32_t(c.value("sliding_window", 512)));
    w.set_bools(a + "attention.sliding_window_pattern", sliding);
    w.set_u32(a + "attention.shared_kv_layers", uint32_t(shared));
    const int64_t ple = c.contains("hidden_size_per_layer_input") && c["hidden_size_per_layer_input"].is_number_integer()
                            ? c["hidden_size_per_layer_input"].get<int64_t>()
                            : 0;
    w.set_u32(a + "embedding_length_per_layer_input", uint32_t(ple));
    w.set_f32(a + "rope.freq_base", float(rope_of(c, "full_attention").value("rope_theta", 1e6)));
    w.set_f32(a + "rope.freq_base_swa", float(rope_of(c, "sliding_attention").value("rope_theta", 1e4)));
    w.set_u32(a + "rope.dimension_count", uint32_t(global_dim));
    w.set_u32(a + "rope.dimension_count_swa", uint32_t(double(head_dim) * c.value("partial_rotary_factor", 1.0)));
    if (c.contains("final_logit_softcapping") && c["final_logit_softcapping"].is_number())
      w.set_f32(a + "final_logit_softcapping", c["final_logit_softcapping"].get<float>());
    if (c.value("enable_moe_block", false)) {
      w.set_u32(a + "expert_count", uint32_t(require_int(c, "num_experts")));
      w.set_u32(a + "expert_used_count", uint32_t(require_int(c, "top_k_experts")));
      w.set_u32(a + "expert_feed_forward_length", uint32_t(require_int(c, "moe_intermediate_size")));
    }
  }

  std::string spm_vocabulary() const override { return "gemma4"; }

  std::vector<GgufGeneratedTensor> generated(const nlohmann::json& c) const override {
    if (rope_of(c, "full_attention").value("rope_type", "default") != "proportional") return {};
    const int64_t half = require_int(c, "global_head_dim") / 2;
    const int64_t rotated = rotated_pairs(c);
    GgufGeneratedTensor t{"rope_freqs.weight", {half}, std::vector<float>(size_t(half), 1e30f)};
    std::fill_n(t.values.begin(), std::min(rotated, half), 1.0f);
    return {t};
  }
};

}  // namespace

const GgufDialect& gguf_gemma4_dialect() {
  static const Gemma4Dialect dialect;
  return dialect;
}

}  // namespace nextn
