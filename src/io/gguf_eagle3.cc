// io/gguf_eagle3.cc — EAGLE-3 drafters in llama.cpp's `eagle3` GGUF layout, as its
// converter writes them (the llama converter with is_eagle3; reading only):
//   - names: fc.weight, enc.output_norm.weight (input_norm, with norm_before_fc),
//     blk.0.attn_norm (the embedding's input_layernorm), blk.0.attn_norm_2 (hidden_norm),
//     blk.0.attn_q/k/v/output, blk.0.ffn_norm / ffn_gate / ffn_up / ffn_down,
//     output_norm, optional output (the draft-vocabulary lm_head) and token_embd;
//   - Q and K rows interleaved per head for ggml's RoPE, as in `llama` files;
//   - d2t (I64 [V_d]) holds absolute target ids, where Hugging Face stores offsets
//     (target id = i + d2t[i]): read back as offsets;
//   - metadata: the llama keys under eagle3.* plus eagle3.target_layers (the three target
//     layer inputs, as the checkpoint's ids), eagle3.target_hidden_size,
//     eagle3.norm_before_residual and eagle3.norm_before_fc.
#include <cstring>

#include "io/gguf_decoder.h"
#include "util/error.h"

namespace nextn {
namespace {

const std::pair<const char*, const char*> kNames[] = {
    {"fc.weight", "fc.weight"},
    {"enc.output_norm.weight", "input_norm.weight"},
    {"blk.0.attn_norm.weight", "midlayer.input_layernorm.weight"},
    {"blk.0.attn_norm_2.weight", "midlayer.hidden_norm.weight"},
    {"blk.0.attn_q.weight", "midlayer.self_attn.q_proj.weight"},
    {"blk.0.attn_k.weight", "midlayer.self_attn.k_proj.weight"},
    {"blk.0.attn_v.weight", "midlayer.self_attn.v_proj.weight"},
    {"blk.0.attn_output.weight", "midlayer.self_attn.o_proj.weight"},
    {"blk.0.ffn_norm.weight", "midlayer.post_attention_layernorm.weight"},
    {"blk.0.ffn_gate.weight", "midlayer.mlp.gate_proj.weight"},
    {"blk.0.ffn_up.weight", "midlayer.mlp.up_proj.weight"},
    {"blk.0.ffn_down.weight", "midlayer.mlp.down_proj.weight"},
    {"output_norm.weight", "norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"token_embd.weight", "embed_tokens.weight"},
    {"d2t", "d2t"},
};

class Eagle3Dialect : public GgufDialect {
 public:
  std::string arch() const override { return "eagle3"; }
  bool writes(const std::string&) const override { return false; }

  std::string hf_name(const std::string& g) const override {
    for (const auto& [gguf, hf] : kNames)
      if (g == gguf) return hf;
    return "";
  }
  std::string gguf_name(const std::string& h) const override {
    for (const auto& [gguf, hf] : kNames)
      if (h == hf) return gguf;
    return "";
  }

  TensorView read_tensor(const TensorView& t, const std::string& hf, const GgufMetadata& md,
                         std::vector<std::unique_ptr<uint8_t[]>>& owned) const override {
    TensorView view = t;
    view.name = hf;
    return llama_qk_rows_to_hf(t, view, md, owned);
  }

  RawTensor read_raw(const RawTensor& t, const std::string& hf, const GgufMetadata&,
                     std::vector<std::unique_ptr<uint8_t[]>>& owned) const override {
    RawTensor raw = t;
    raw.name = hf;
    if (hf != "d2t" || t.dtype != "I64") return raw;  // the loader names a wrong dtype
    const size_t n = t.nbytes / 8;
    auto out = std::make_unique<uint8_t[]>(t.nbytes);
    for (size_t i = 0; i < n; ++i) {
      int64_t id;
      std::memcpy(&id, static_cast<const uint8_t*>(t.data) + i * 8, 8);
      const int64_t offset = id - int64_t(i);
      std::memcpy(out.get() + i * 8, &offset, 8);
    }
    raw.data = out.get();
    owned.push_back(std::move(out));
    return raw;
  }

  nlohmann::json config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors) const override {
    const std::string& path = md.path();
    if (tensors.count("rope_freqs.weight"))
      fail(ErrorKind::kUnsupported, "{}: tensor 'rope_freqs.weight' (per-frequency RoPE factors) is not supported",
           path);
    nlohmann::json c = nlohmann::json::object();
    c["architectures"] = nlohmann::json::array({"LlamaForCausalLMEagle3"});
    c["model_type"] = "llama";
    c["num_hidden_layers"] = md.integer("block_count");
    c["hidden_size"] = md.integer("embedding_length");
    c["intermediate_size"] = md.integer("feed_forward_length");
    const int64_t heads = md.integer("attention.head_count");
    c["num_attention_heads"] = heads;
    c["num_key_value_heads"] = md.integer("attention.head_count_kv", heads);
    if (md.has("attention.key_length")) c["head_dim"] = md.integer("attention.key_length");
    c["rms_norm_eps"] = md.number("attention.layer_norm_rms_epsilon", 1e-6);
    c["rope_theta"] = md.number("rope.freq_base", 10000.0);
    const std::string scaling = md.string("rope.scaling.type", "none");
    if (scaling == "linear") {
      c["rope_scaling"] = {{"type", "linear"}, {"factor", md.number("rope.scaling.factor", 1.0)}};
    } else if (scaling != "none") {
      fail(ErrorKind::kUnsupported, "{}: metadata key 'eagle3.rope.scaling.type' = '{}' is not supported (supported: "
           "none, linear)", path, scaling);
    }
    // The target's vocabulary: the file's own key, else its token list.
    const nlohmann::json& kv = md.all();
    if (md.has("vocab_size")) c["vocab_size"] = md.integer("vocab_size");
    else if (kv.contains("tokenizer.ggml.tokens") && kv["tokenizer.ggml.tokens"].is_array())
      c["vocab_size"] = kv["tokenizer.ggml.tokens"].size();
    else
      fail(ErrorKind::kBadInput, "{}: no vocabulary size (metadata key 'eagle3.vocab_size' or tokenizer.ggml.tokens)",
           path);
    if (auto out = tensors.find("output.weight"); out != tensors.end() && out->second->shape.size() == 2)
      c["draft_vocab_size"] = out->second->shape[0];
    if (md.has("target_layers")) c["eagle_aux_hidden_state_layer_ids"] = md.per_layer("target_layers", 3);
    if (md.has("target_hidden_size")) c["target_hidden_size"] = md.integer("target_hidden_size");
    for (const char* key : {"norm_before_residual", "norm_before_fc"}) {
      const std::string full = "eagle3." + std::string(key);
      if (kv.contains(full) && !kv[full].is_boolean())
        fail(ErrorKind::kBadInput, "{}: metadata key '{}' must be a boolean", path, full);
      c[key] = kv.contains(full) && kv[full].get<bool>();
    }
    return c;
  }

  void write_metadata(const nlohmann::json&, GgufWriter&) const override {
    fail(ErrorKind::kUnsupported, "quantize: nextn does not write eagle3 GGUF files");
  }
};

}  // namespace

const GgufDialect& gguf_eagle3_dialect() {
  static const Eagle3Dialect dialect;
  return dialect;
}

}  // namespace nextn
