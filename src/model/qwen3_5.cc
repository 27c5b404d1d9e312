// model/qwen3_5.cc — Qwen3.5 / Qwen3.6 dense (Qwen3_5ForCausalLM, and the text part of
// Qwen3_5ForConditionalGeneration, whose config nests it under text_config and whose
// tensors live under model.language_model.; vision weights are ignored). Hybrid
// layers: `layer_types` (or every full_attention_interval-th layer) is gated full
// attention, the others Gated DeltaNet (qwen3_5_attention.cc, qwen3_5_delta_net.cc).
// RMSNorm scales are (1 + w) (norm_offset 1) except the DeltaNet output norm. The MTP
// head (mtp.*, or model.mtp.* as some re-saved checkpoints name it; mtp_num_hidden_layers)
// is one gated attention layer with its own KV; mtp_use_dedicated_embeddings = true (a
// head with its own embedding table) makes --mtp fail saying so.
// qwen3_5_moe (Qwen3.5/3.6-35B-A3B) is the same model with routed MLPs (num_experts:
// routed_mlp.h), its MTP layer's MLP routed too. Qwen3-Next (fused, grouped GDN
// projections) is refused at load.
#include "io/checkpoint.h"
#include "model/architecture.h"
#include "model/qwen3_5_layers.h"
#include "util/log.h"

namespace nextn {
namespace {

void check_rope_type(const ConfigReader& reader, const char* key) {
  if (!reader.has(key)) return;
  const nlohmann::json& rs = reader.json().at(key);
  if (!rs.is_object()) reader.error(ErrorKind::kBadInput, "key '{}' must be an object or null", key);
  ConfigReader sub(rs, reader.path() + " " + key);
  const std::string type = sub.get_string("rope_type", sub.get_string("type", "default"));
  // Text-only input gives the three mRoPE axes the same position: plain 1-D RoPE.
  if (type != "default" && type != "mrope")
    reader.error(ErrorKind::kUnsupported, "{} type '{}' is not supported for Qwen3.5 (supported: default, mrope)", key,
                 type);
}

// mrope_section [t, h, w] (in rope_parameters, or rope_scaling in older configs) over the
// `slots` = rotary_dim / 2 frequencies. Interleaved (mrope_interleaved, Qwen3.5's form:
// Hugging Face Qwen3_5TextRotaryEmbedding): slot j is h when j % 3 == 1 and j < 3·h_count,
// w when j % 3 == 2 and j < 3·w_count, t otherwise. Chunked: t slots, then h, then w.
void read_mrope(const ConfigReader& reader, int slots, ModelConfig& c) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!reader.has(key) || !reader.json().at(key).is_object()) continue;
    const nlohmann::json& rp = reader.json().at(key);
    if (!rp.contains("mrope_section") || rp["mrope_section"].is_null()) continue;
    const nlohmann::json& sec = rp["mrope_section"];
    if (!sec.is_array() || sec.size() != 3 || !sec[0].is_number_integer() || !sec[1].is_number_integer() ||
        !sec[2].is_number_integer() || sec[0].get<int>() < 0 || sec[1].get<int>() < 0 || sec[2].get<int>() < 0)
      reader.error(ErrorKind::kBadInput, "{} mrope_section must be three non-negative integers, got {}", key,
                   sec.dump());
    const int t = sec[0].get<int>(), h = sec[1].get<int>(), w = sec[2].get<int>();
    const bool interleaved = rp.value("mrope_interleaved", true);
    c.mrope_axes.assign(size_t(slots), 0);
    if (interleaved) {
      for (int j = 0; j < slots; ++j)
        c.mrope_axes[size_t(j)] = (j % 3 == 1 && j < 3 * h) ? 1 : (j % 3 == 2 && j < 3 * w) ? 2 : 0;
    } else {
      if (t + h + w != slots)
        reader.error(ErrorKind::kBadInput, "{} mrope_section {} must sum to rotary_dim / 2 = {} (not interleaved)", key,
                     sec.dump(), slots);
      for (int j = 0; j < slots; ++j) c.mrope_axes[size_t(j)] = j < t ? 0 : j < t + h ? 1 : 2;
    }
    return;
  }
}

void configure_qwen3_5(const ConfigReader& reader, const Checkpoint& ckpt, ModelConfig& c) {
  check_rope_type(reader, "rope_scaling");
  check_rope_type(reader, "rope_parameters");
  c.qk_norm = true;
  c.norm_offset = 1.0f;
  c.rope_theta = rope_parameter(reader, "rope_theta", 10000000.0);
  if (!(c.rope_theta > 0)) reader.error(ErrorKind::kBadInput, "rope_theta must be positive");
  const double partial = rope_parameter(reader, "partial_rotary_factor", 0.25);
  const int rotary = int(c.head_dim * partial);
  if (!(partial > 0 && partial <= 1) || rotary < 2 || rotary % 2 != 0)
    reader.error(ErrorKind::kBadInput, "partial_rotary_factor {} gives {} rotary dims of head_dim {} (need an even number >= 2)",
                 partial, rotary, c.head_dim);
  read_mrope(reader, rotary / 2, c);
  c.image_token_id = reader.get_int("image_token_id", -1);
  c.vision_start_token_id = reader.get_int("vision_start_token_id", -1);
  c.vision_end_token_id = reader.get_int("vision_end_token_id", -1);
  const bool output_gate = reader.get_bool("attn_output_gate", true);
  if (!output_gate) reader.error(ErrorKind::kUnsupported, "attn_output_gate = false is not supported");

  DeltaNetSpec dn;
  dn.key_heads = reader.get_int("linear_num_key_heads", 16);
  dn.value_heads = reader.get_int("linear_num_value_heads", 32);
  dn.key_dim = reader.get_int("linear_key_head_dim", 128);
  dn.value_dim = reader.get_int("linear_value_head_dim", 128);
  dn.conv_kernel = reader.get_int("linear_conv_kernel_dim", 4);
  // Written by the GGUF reader (io/gguf_checkpoint.cc): llama.cpp's converter tiles the
  // value heads over the key heads; Hugging Face checkpoints group them.
  const std::string order = reader.get_string("linear_value_head_order", "grouped");
  if (order != "grouped" && order != "tiled")
    reader.error(ErrorKind::kBadInput, "linear_value_head_order '{}' is not one of grouped, tiled", order);
  dn.tiled_value_heads = order == "tiled";
  if (dn.key_heads <= 0 || dn.value_heads <= 0 || dn.value_heads % dn.key_heads != 0)
    reader.error(ErrorKind::kBadInput, "linear_num_value_heads ({}) must be a positive multiple of linear_num_key_heads ({})",
                 dn.value_heads, dn.key_heads);
  if (dn.key_dim <= 0 || dn.value_dim <= 0 || dn.value_dim > 512)
    reader.error(ErrorKind::kBadInput, "linear_key_head_dim ({}) and linear_value_head_dim ({}) must be in 1..512",
                 dn.key_dim, dn.value_dim);
  if (dn.conv_kernel < 2 || dn.conv_kernel > 16)
    reader.error(ErrorKind::kBadInput, "linear_conv_kernel_dim must be in 2..16, got {}", dn.conv_kernel);

  // Layer kinds: layer_types, else every full_attention_interval-th layer is full attention.
  std::vector<std::string> types = reader.get_strings("layer_types");
  if (reader.has("layer_types")) {
    if (int(types.size()) != c.num_layers)
      reader.error(ErrorKind::kBadInput, "layer_types lists {} layers but num_hidden_layers is {}", types.size(),
                   c.num_layers);
  } else {
    const int interval = reader.get_int("full_attention_interval", 4);
    if (interval <= 0) reader.error(ErrorKind::kBadInput, "full_attention_interval must be positive");
    for (int i = 0; i < c.num_layers; ++i)
      types.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  }
  c.layers.clear();
  for (int i = 0; i < c.num_layers; ++i) {
    LayerSpec l;
    l.intermediate = c.intermediate_size;
    // "attention": the name Qwen3-Next-era configs give the full layers.
    if (types[size_t(i)] == "full_attention" || types[size_t(i)] == "attention") {
      l.mixer = MixerKind::kAttention;
      l.attention.heads = c.num_heads;
      l.attention.kv_heads = c.num_kv_heads;
      l.attention.head_dim = c.head_dim;
      l.attention.rope_theta = c.rope_theta;
      l.attention.rotary_dim = rotary;
      l.attention.qkv_bias = reader.get_bool("attention_bias", false);
      l.attention.qk_norm = true;
      l.attention.output_gate = true;
    } else if (types[size_t(i)] == "linear_attention") {
      l.mixer = MixerKind::kGatedDeltaNet;
      l.delta_net = dn;
    } else {
      reader.error(ErrorKind::kBadInput, "unknown layer type '{}' at layer {} (supported: linear_attention, full_attention; legacy: attention)",
                   types[size_t(i)], i);
    }
    c.layers.push_back(l);
  }

  // qwen3_5_moe: every layer not in mlp_only_layers (and every decoder_sparse_step-th)
  // is routed: softmax top-k, renormalised, plus a sigmoid-gated shared expert.
  if (reader.has("num_experts")) {
    MlpSpec moe;
    moe.experts = reader.require_int("num_experts");
    moe.top_k = reader.require_int("num_experts_per_tok");
    moe.expert_intermediate = reader.require_int("moe_intermediate_size");
    moe.renormalize = reader.get_bool("norm_topk_prob", true);
    moe.shared_intermediate = reader.get_int("shared_expert_intermediate_size", 0);
    moe.shared_gate = moe.shared_intermediate > 0;
    if (moe.experts <= 0 || moe.top_k <= 0 || moe.top_k > moe.experts)
      reader.error(ErrorKind::kBadInput, "num_experts_per_tok ({}) must be in 1..num_experts ({})", moe.top_k,
                   moe.experts);
    if (moe.expert_intermediate <= 0 || moe.shared_intermediate < 0)
      reader.error(ErrorKind::kBadInput, "moe_intermediate_size ({}) must be positive and "
                   "shared_expert_intermediate_size ({}) not negative", moe.expert_intermediate,
                   moe.shared_intermediate);
    const int step = reader.get_int("decoder_sparse_step", 1);
    if (step <= 0) reader.error(ErrorKind::kBadInput, "decoder_sparse_step must be positive, got {}", step);
    std::vector<bool> dense(size_t(c.num_layers), false);
    if (reader.has("mlp_only_layers")) {
      const nlohmann::json& only = reader.json().at("mlp_only_layers");
      if (!only.is_array()) reader.error(ErrorKind::kBadInput, "key 'mlp_only_layers' must be a list of layer indices");
      for (const nlohmann::json& v : only) {
        if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() >= c.num_layers)
          reader.error(ErrorKind::kBadInput, "mlp_only_layers names {} (layers are 0..{})", v.dump(), c.num_layers - 1);
        dense[v.get<size_t>()] = true;
      }
    }
    for (int i = 0; i < c.num_layers; ++i)
      if (!dense[size_t(i)] && (i + 1) % step == 0) c.layers[size_t(i)].mlp = moe;
  }

  c.weight_prefix = ckpt.has("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  const int mtp = reader.get_int("mtp_num_hidden_layers", 0);
  if (mtp < 0) reader.error(ErrorKind::kBadInput, "mtp_num_hidden_layers must be >= 0, got {}", mtp);
  if (mtp > 0) {
    // The head's tensors: mtp.* as released; model.mtp.* (or under the language model) as
    // some re-saved checkpoints store them.
    for (const std::string prefix : {"mtp.", "model.mtp.", "model.language_model.mtp."})
      if (ckpt.has(prefix + "fc.weight")) c.mtp_names = qwen35_mtp_names(prefix), c.mtp_layout = MtpLayout::kQwen35;
    if (c.mtp_layout == MtpLayout::kNone) {
      c.mtp_unavailable = reader.path() + ": mtp_num_hidden_layers is " + std::to_string(mtp) +
                          " but the checkpoint has no MTP tensors (looked for mtp.fc.weight, model.mtp.fc.weight)";
      log_warn("{}; MTP disabled", c.mtp_unavailable);
    } else if (reader.get_bool("mtp_use_dedicated_embeddings", false)) {
      // The head would embed its input token with a table of its own, whose layout no
      // released checkpoint shows; the shared embedding would draft from the wrong rows.
      c.mtp_unavailable = reader.path() + ": mtp_use_dedicated_embeddings = true (an MTP head with its own embedding "
                          "table) is not supported";
      c.mtp_layout = MtpLayout::kNone;
      log_warn("{}; MTP disabled", c.mtp_unavailable);
    } else {
      c.num_mtp_layers = mtp;
    }
  }
}

std::unique_ptr<Block> make_qwen3_5_block(const ModelConfig& config, const LayerSpec& layer, WeightStore& store,
                                          const std::string& prefix) {
  if (layer.mixer == MixerKind::kGatedDeltaNet) return make_gated_delta_net_block(config, layer, store, prefix);
  return make_gated_attention_block(config, layer, store, prefix);
}

}  // namespace

const Architecture kQwen3_5Architecture = {"Qwen3_5ForCausalLM", "qwen3_5_text", configure_qwen3_5,
                                           make_qwen3_5_block};
const Architecture kQwen3_5VisionLanguageArchitecture = {"Qwen3_5ForConditionalGeneration", "qwen3_5",
                                                         configure_qwen3_5, make_qwen3_5_block};
const Architecture kQwen3_5MoeArchitecture = {"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe",
                                              configure_qwen3_5, make_qwen3_5_block};
const Architecture kQwen3_5MoeTextArchitecture = {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text", configure_qwen3_5,
                                                  make_qwen3_5_block};
const Architecture kQwen3NextArchitecture = {"Qwen3NextForCausalLM", "qwen3_next", nullptr, nullptr,
                                             "its fused, grouped Gated DeltaNet projections are not supported yet"};

}  // namespace nextn
