// io/gguf_decoder.cc — the shared reading of the decoder families' GGUF files (see
// gguf_decoder.h).
#include "io/gguf_decoder.h"

#include "io/gguf_names.h"
#include "io/json_file.h"
#include "util/error.h"

namespace nextn {

std::string GgufDecoderDialect::hf_name(const std::string& g) const { return hf_name_from_gguf(g, arch_); }
std::string GgufDecoderDialect::gguf_name(const std::string& hf) const { return gguf_name_from_hf(hf, arch_); }

int64_t GgufDecoderDialect::decoder_layers(const GgufMetadata& md) {
  const int64_t n_mtp = md.integer("nextn_predict_layers", 0);
  const int64_t blocks = md.integer("block_count");
  if (n_mtp < 0 || n_mtp >= blocks)
    fail(ErrorKind::kBadInput, "{}: metadata key '{}.nextn_predict_layers' ({}) must be below block_count ({})",
         md.path(), md.arch(), n_mtp, blocks);
  return blocks - n_mtp;  // llama.cpp counts the MTP layers as blocks
}

int64_t GgufDecoderDialect::head_dim(const nlohmann::json& c) {
  return c.contains("head_dim") ? c["head_dim"].get<int64_t>()
                                : c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();
}

bool GgufDecoderDialect::has_q_bias(const std::map<std::string, const TensorView*>& tensors) {
  for (const auto& [name, t] : tensors)
    if (name.ends_with(".attn_q.bias")) return true;
  return false;
}

TensorView GgufDecoderDialect::read_tensor(const TensorView& t, const std::string& hf, const GgufMetadata&,
                                           std::vector<std::unique_ptr<uint8_t[]>>&) const {
  TensorView view = t;
  view.name = hf;
  // The Qwen shared expert's gate is one row: converters store it [H] (squeezed) or
  // [1, H]; the model reads [1, H].
  if (t.name.ends_with(".ffn_gate_inp_shexp.weight") && t.shape.size() == 1) view.shape = {1, t.shape[0]};
  return view;
}

nlohmann::json GgufDecoderDialect::config(const GgufMetadata& md,
                                          const std::map<std::string, const TensorView*>& tensors) const {
  const std::string& path = md.path();
  if (tensors.count("rope_freqs.weight"))
    fail(ErrorKind::kUnsupported, "{}: tensor 'rope_freqs.weight' (per-frequency RoPE factors) is not supported", path);
  const int64_t n_heads = md.integer("attention.head_count");
  const int64_t n_kv_heads = md.integer("attention.head_count_kv", n_heads);
  if (n_heads <= 0 || n_kv_heads <= 0)
    fail(ErrorKind::kBadInput, "{}: metadata key '{}.attention.head_count' must be positive", path, arch_);
  const int64_t n_layers = decoder_layers(md);
  const int64_t n_mtp = md.integer("nextn_predict_layers", 0);

  nlohmann::json c = nlohmann::json::object();
  c["architectures"] = nlohmann::json::array({hf_architecture_});
  c["model_type"] = model_type_;
  c["num_hidden_layers"] = n_layers;
  if (n_mtp > 0) c[mtp_key()] = n_mtp;
  c["hidden_size"] = md.integer("embedding_length");
  // qwen35moe has no dense MLP: its converter writes the key only when the config has
  // an intermediate_size.
  if (dense_mlp_required() || md.has("feed_forward_length")) c["intermediate_size"] = md.integer("feed_forward_length");
  c["num_attention_heads"] = n_heads;
  c["num_key_value_heads"] = n_kv_heads;
  if (md.has("attention.key_length")) c["head_dim"] = md.integer("attention.key_length");
  c["rms_norm_eps"] = md.number("attention.layer_norm_rms_epsilon", 1e-6);
  c["rope_theta"] = md.number("rope.freq_base", 10000.0);
  c["max_position_embeddings"] = md.integer("context_length", 4096);
  const std::string scaling = md.string("rope.scaling.type", "none");
  if (scaling == "linear") {
    c["rope_scaling"] = {{"type", "linear"}, {"factor", md.number("rope.scaling.factor", 1.0)}};
  } else if (scaling != "none") {
    fail(ErrorKind::kUnsupported, "{}: metadata key '{}.rope.scaling.type' = '{}' is not supported (supported: none, "
         "linear)", path, arch_, scaling);
  }
  auto embed = tensors.find("token_embd.weight");
  if (embed == tensors.end()) fail(ErrorKind::kBadInput, "{}: missing tensor 'token_embd.weight'", path);
  if (embed->second->shape.size() != 2) fail(ErrorKind::kBadInput, "{}: tensor 'token_embd.weight' is not 2-D", path);
  c["vocab_size"] = embed->second->shape[0];
  // Tied embeddings are decided by the tensors present (a file may lack output.weight).
  c["tie_word_embeddings"] = tensors.count("output.weight") == 0;
  family_config(md, tensors, c);
  return c;
}

void GgufDecoderDialect::write_metadata(const nlohmann::json&, GgufWriter&) const {
  fail(ErrorKind::kInternal, "{}: written by cli/quantize.cc, not through its dialect", arch_);
}

}  // namespace nextn
