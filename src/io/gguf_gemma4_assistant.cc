// io/gguf_gemma4_assistant.cc — the Gemma 4 "-assistant" drafter in llama.cpp's
// `gemma4-assistant` GGUF layout, as its converter (Gemma4AssistantModel) writes it:
//   - names: the Gemma 4 layer names of io/gguf_gemma4.cc for blk.{i}.* (query-only
//     layers: attn_q, attn_q_norm, attn_output, the sandwich norms, ffn_*,
//     layer_output_scale), token_embd (also the tied output head), output_norm, and
//     nextn.pre_projection / nextn.post_projection;
//   - metadata: the gemma4 keys under gemma4-assistant.* (block_count, embedding_length,
//     feed_forward_length, head_count, per-layer head_count_kv, key_length /
//     key_length_swa, sliding_window_pattern, final_logit_softcapping) plus
//     embedding_length_out, the target's hidden size (backbone_hidden_size);
//   - the converter drops masked_embedding.* (the E2B/E4B centroid masking), so the
//     drafter scores the whole vocabulary; drafting stays lossless, only which tokens it
//     proposes can differ from the safetensors form with use_ordered_embeddings.
// The layers take RoPE, window and head geometry from the target layers whose KV they
// read (model/gemma4_assistant.cc), so rope_freqs needs no reading here. Reading only:
// `nextn quantize` does not write assistants.
#include <algorithm>

#include "io/gguf_dialect.h"
#include "util/error.h"

namespace nextn {

const GgufDialect& gguf_gemma4_dialect();  // io/gguf_gemma4.cc: the layer names

namespace {

class Gemma4AssistantDialect : public GgufDialect {
 public:
  std::string arch() const override { return "gemma4-assistant"; }
  bool writes(const std::string&) const override { return false; }

  std::string hf_name(const std::string& g) const override {
    if (g == "nextn.pre_projection.weight") return "pre_projection.weight";
    if (g == "nextn.post_projection.weight") return "post_projection.weight";
    if (g == "output.weight") return "";  // the head is token_embd (tied)
    return gguf_gemma4_dialect().hf_name(g);
  }
  std::string gguf_name(const std::string& hf) const override {
    if (hf == "pre_projection.weight") return "nextn.pre_projection.weight";
    if (hf == "post_projection.weight") return "nextn.post_projection.weight";
    return gguf_gemma4_dialect().gguf_name(hf);
  }

  nlohmann::json config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors) const override {
    const std::string& path = md.path();
    auto tensor = [&](const std::string& name) -> const TensorView* {
      auto it = tensors.find(name);
      return it == tensors.end() ? nullptr : it->second;
    };
    const int64_t n = md.integer("block_count");
    if (n <= 0) fail(ErrorKind::kBadInput, "{}: metadata key 'gemma4-assistant.block_count' must be positive", path);
    nlohmann::json t = nlohmann::json::object();
    t["model_type"] = "gemma4_text";
    t["num_hidden_layers"] = n;
    t["hidden_size"] = md.integer("embedding_length");
    t["rms_norm_eps"] = md.number("attention.layer_norm_rms_epsilon", 1e-6);
    const std::vector<int64_t> heads = md.per_layer("attention.head_count", n);
    const std::vector<int64_t> ff = md.per_layer("feed_forward_length", n);
    for (int64_t i = 1; i < n; ++i)
      if (heads[size_t(i)] != heads[0] || ff[size_t(i)] != ff[0])
        fail(ErrorKind::kUnsupported, "{}: gemma4-assistant: a different head count or MLP width per layer", path);
    t["num_attention_heads"] = heads[0];
    t["intermediate_size"] = ff[0];
    const std::vector<bool> sliding = md.flags("attention.sliding_window_pattern", n);
    nlohmann::json types = nlohmann::json::array();
    for (bool s : sliding) types.push_back(s ? "sliding_attention" : "full_attention");
    t["layer_types"] = types;
    const int64_t global_dim = md.integer("attention.key_length");
    t["global_head_dim"] = global_dim;
    t["head_dim"] = md.integer("attention.key_length_swa", global_dim);
    // Key/value heads of the target layers read, per kind; full layers with another count
    // than the sliding ones are the K=V form (num_global_key_value_heads).
    const std::vector<int64_t> kv = md.per_layer("attention.head_count_kv", n);
    int64_t local_kv = -1, global_kv = -1;
    for (int64_t i = 0; i < n; ++i) {
      int64_t& want = sliding[size_t(i)] ? local_kv : global_kv;
      if (want >= 0 && want != kv[size_t(i)])
        fail(ErrorKind::kUnsupported, "{}: gemma4-assistant: different key/value head counts among layers of one kind", path);
      want = kv[size_t(i)];
    }
    t["num_key_value_heads"] = local_kv >= 0 ? local_kv : global_kv;
    if (global_kv >= 0 && local_kv >= 0 && global_kv != local_kv) {
      t["attention_k_eq_v"] = true;
      t["num_global_key_value_heads"] = global_kv;
    }
    if (md.has("final_logit_softcapping")) t["final_logit_softcapping"] = md.number("final_logit_softcapping", 0.0);
    const TensorView* embed = tensor("token_embd.weight");
    if (!embed || embed->shape.size() != 2) fail(ErrorKind::kBadInput, "{}: missing 2-D tensor 'token_embd.weight'", path);
    t["vocab_size"] = embed->shape[0];
    t["tie_word_embeddings"] = true;

    nlohmann::json c = nlohmann::json::object();
    c["architectures"] = nlohmann::json::array({"Gemma4AssistantForCausalLM"});
    c["model_type"] = "gemma4_assistant";
    if (!md.has("embedding_length_out"))
      fail(ErrorKind::kBadInput, "{}: missing metadata key 'gemma4-assistant.embedding_length_out' (the target's hidden size)",
           path);
    c["backbone_hidden_size"] = md.integer("embedding_length_out");
    c["use_ordered_embeddings"] = false;
    c["text_config"] = t;
    return c;
  }

  void write_metadata(const nlohmann::json&, GgufWriter&) const override {
    fail(ErrorKind::kUnsupported, "quantize: nextn does not write gemma4-assistant GGUF files");
  }
};

}  // namespace

const GgufDialect& gguf_gemma4_assistant_dialect() {
  static const Gemma4AssistantDialect dialect;
  return dialect;
}

}  // namespace nextn
