// io/gguf_dflash.cc — the DFlash drafter (model/dflash_model.h) in llama.cpp's `dflash`
// GGUF layout, as its converter (DFlashModel) writes it from a DFlashDraftModel:
//   - names: blk.{i}.* as the qwen3 dialect names a decoder layer (attn_norm, attn_q/k/v,
//     attn_output, attn_q_norm, attn_k_norm, ffn_norm, ffn_gate/up/down), read under the
//     checkpoint's bare layers.{i}.* names; fc.weight; enc.output_norm (hidden_norm, the
//     norm after fc); output_norm (norm). No token_embd and no output: the target's are
//     used. NEOX RoPE, q/k rows as in the safetensors file (not permuted);
//   - metadata: the qwen3 keys under dflash.* (block_count, embedding_length,
//     feed_forward_length, attention.head_count(_kv), attention.key_length,
//     rope.freq_base, attention.layer_norm_rms_epsilon), dflash.block_size,
//     dflash.target_layers = the config's target_layer_ids + 1 (the stream each tap
//     reads), tokenizer.ggml.mask_token_id, and optionally dflash.attention.sliding_window
//     with sliding_window_pattern.
// Reading only: `nextn quantize` does not write drafters.
#include "io/gguf_dialect.h"
#include "io/gguf_names.h"
#include "util/error.h"

namespace nextn {
namespace {

class DFlashDialect : public GgufDialect {
 public:
  std::string arch() const override { return "dflash"; }
  bool writes(const std::string&) const override { return false; }

  std::string hf_name(const std::string& g) const override {
    if (g == "fc.weight") return g;
    if (g == "enc.output_norm.weight") return "hidden_norm.weight";
    if (g == "output_norm.weight") return "norm.weight";
    const std::string hf = hf_name_from_gguf(g, "qwen3");  // "model.layers.N.…"
    const std::string prefix = "model.layers.";
    return hf.rfind(prefix, 0) == 0 ? hf.substr(6) : "";
  }
  std::string gguf_name(const std::string& hf) const override {
    if (hf == "fc.weight") return hf;
    if (hf == "hidden_norm.weight") return "enc.output_norm.weight";
    if (hf == "norm.weight") return "output_norm.weight";
    return hf.rfind("layers.", 0) == 0 ? gguf_name_from_hf("model." + hf, "qwen3") : "";
  }

  nlohmann::json config(const GgufMetadata& md, const std::map<std::string, const TensorView*>&) const override {
    const std::string& path = md.path();
    const int64_t n = md.integer("block_count");
    if (n <= 0) fail(ErrorKind::kBadInput, "{}: metadata key 'dflash.block_count' must be positive", path);
    nlohmann::json c = nlohmann::json::object();
    c["architectures"] = nlohmann::json::array({"DFlashDraftModel"});
    c["model_type"] = "qwen3";
    c["num_hidden_layers"] = n;
    c["hidden_size"] = md.integer("embedding_length");
    const std::vector<int64_t> ff = md.per_layer("feed_forward_length", n);
    const std::vector<int64_t> heads = md.per_layer("attention.head_count", n);
    const std::vector<int64_t> kv = md.per_layer("attention.head_count_kv", n);
    for (int64_t i = 1; i < n; ++i)
      if (ff[size_t(i)] != ff[0] || heads[size_t(i)] != heads[0] || kv[size_t(i)] != kv[0])
        fail(ErrorKind::kUnsupported, "{}: dflash: a different MLP width or head count per layer", path);
    c["intermediate_size"] = ff[0];
    c["num_attention_heads"] = heads[0];
    c["num_key_value_heads"] = kv[0];
    if (md.has("attention.key_length")) c["head_dim"] = md.integer("attention.key_length");
    c["rope_theta"] = md.number("rope.freq_base", 1000000.0);
    c["rms_norm_eps"] = md.number("attention.layer_norm_rms_epsilon", 1e-6);
    c["block_size"] = md.integer("block_size", 16);
    nlohmann::json dflash = nlohmann::json::object();
    const nlohmann::json& all = md.all();
    if (!all.contains("tokenizer.ggml.mask_token_id") || !all["tokenizer.ggml.mask_token_id"].is_number_integer())
      fail(ErrorKind::kBadInput, "{}: missing integer metadata key 'tokenizer.ggml.mask_token_id'", path);
    dflash["mask_token_id"] = all["tokenizer.ggml.mask_token_id"];
    if (all.contains("dflash.target_layers")) {
      const nlohmann::json& taps = all["dflash.target_layers"];
      if (!taps.is_array()) fail(ErrorKind::kBadInput, "{}: 'dflash.target_layers' must be an array", path);
      nlohmann::json ids = nlohmann::json::array();
      for (const auto& t : taps) {
        if (!t.is_number_integer()) fail(ErrorKind::kBadInput, "{}: 'dflash.target_layers' holds a non-integer", path);
        ids.push_back(t.get<int64_t>() - 1);  // the file stores the stream: layer id + 1
      }
      dflash["target_layer_ids"] = ids;
    }
    c["dflash_config"] = dflash;
    if (md.has("attention.sliding_window") && md.has("attention.sliding_window_pattern")) {
      c["sliding_window"] = md.integer("attention.sliding_window");
      nlohmann::json types = nlohmann::json::array();
      for (bool s : md.flags("attention.sliding_window_pattern", n))
        types.push_back(s ? "sliding_attention" : "full_attention");
      c["layer_types"] = types;
    }
    return c;
  }

  void write_metadata(const nlohmann::json&, GgufWriter&) const override {
    fail(ErrorKind::kUnsupported, "quantize: nextn does not write dflash GGUF files");
  }
};

}  // namespace

const GgufDialect& gguf_dflash_dialect() {
  static const DFlashDialect dialect;
  return dialect;
}

}  // namespace nextn
