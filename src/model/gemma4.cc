// model/gemma4.cc — Gemma 4 text models (Gemma4ForCausalLM, and the text part of
// Gemma4ForConditionalGeneration: text_config, tensors under model.language_model.;
// the vision tower is vision/gemma4_vision.h, whose rows replace the image tokens'
// embeddings without the √H scale; the audio tower is ignored). What differs from the
// shared decoder:
//   - layer_types: sliding-window layers (head_dim, window, local RoPE theta) between
//     full layers (global_head_dim, "proportional" RoPE: NeoX over the whole head with
//     only the first partial_rotary_factor * D / 2 frequencies non-zero)
//   - every norm is plain x̂·w; q_norm / k_norm per head, v normed without a weight;
//     attention scale 1.0; K=V full layers (attention_k_eq_v: v = the raw key projection,
//     num_global_key_value_heads)
//   - h = x + post_attention_norm(attn(input_norm(x)));
//     h = h + post_feedforward_norm(GeGLU(pre_feedforward_norm(h)));
//     PLE: h = h + post_per_layer_input_norm(per_layer_projection(gelu(per_layer_input_gate(h)) ⊙ ple_i));
//     h = h · layer_scalar
//   - embedding × √H, tied head, final logits cap·tanh(z / cap)
//   - the last num_kv_shared_layers layers read the KV of the last earlier layer of the
//     same type and use 2 × intermediate_size when use_double_wide_mlp
// The MoE variant (enable_moe_block, 26B-A4B) adds routed experts beside each dense MLP.
// Config forms: newer transformers' per_layer_config (the full layers' head dim and
// key/value heads per layer) is read back into the flat keys (gemma4_flat_config);
// legacy layer_types names (global, local_sliding) are mapped; use_bidirectional_attention
// "vision" makes an image's rows see each other in sliding layers, "all" is refused; √H
// and √P are cast to the embedding tables' dtype, as Hugging Face does. Per-layer
// embeddings take pad_token_id's row at image rows.
#include <algorithm>
#include <cmath>

#include "io/checkpoint.h"
#include "model/architecture.h"
#include "model/decoder_block.h"
#include "model/gemma4_layers.h"
#include "model/rope_table.h"
#include "util/dtype.h"
#include "util/error.h"

namespace nextn {
namespace {

// rope_parameters.{sliding_attention,full_attention}: (theta, partial factor for "proportional", 0 for "default").
struct RopeKind {
  double theta;
  double partial;  // 0: every frequency rotates
};

RopeKind rope_kind(const ConfigReader& reader, const char* type, double theta, double partial) {
  if (!reader.has("rope_parameters")) return {theta, partial};
  const nlohmann::json& rp = reader.json().at("rope_parameters");
  if (!rp.is_object()) reader.error(ErrorKind::kBadInput, "key 'rope_parameters' must be an object");
  if (!rp.contains(type)) return {theta, partial};
  if (!rp.at(type).is_object()) reader.error(ErrorKind::kBadInput, "rope_parameters.{} must be an object", type);
  ConfigReader sub(rp.at(type), reader.path() + " rope_parameters." + type);
  const std::string kind = sub.get_string("rope_type", "default");
  RopeKind r{sub.get_double("rope_theta", theta), 0.0};
  if (kind == "proportional") {
    r.partial = sub.get_double("partial_rotary_factor", 1.0);
  } else if (kind != "default") {
    reader.error(ErrorKind::kUnsupported, "rope_parameters.{}: rope_type '{}' is not supported (supported: default, proportional)",
                 type, kind);
  }
  if (!(r.theta > 0)) reader.error(ErrorKind::kBadInput, "rope_parameters.{}: rope_theta must be positive", type);
  return r;
}

std::vector<std::string> layer_types(const ConfigReader& reader, int n_layers) {
  std::vector<std::string> types = reader.get_strings("layer_types");
  if (reader.has("layer_types")) {
    if (int(types.size()) != n_layers)
      reader.error(ErrorKind::kBadInput, "layer_types lists {} layers but num_hidden_layers is {}", types.size(), n_layers);
  } else {
    // Five sliding layers, then a full one; the last layer is always full.
    for (int i = 0; i < n_layers; ++i) types.push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  }
  // Names are checked (and legacy ones mapped) before the last layer is forced to full,
  // so a bad last entry is reported rather than overwritten.
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string canonical = gemma4_layer_type(types[i]);
    if (canonical.empty())
      reader.error(ErrorKind::kBadInput,
                   "unknown layer type '{}' at layer {} (supported: sliding_attention, full_attention; legacy: "
                   "local_sliding, local, global)", types[i], i);
    types[i] = canonical;
  }
  if (!types.empty()) types.back() = "full_attention";
  return types;
}

// The round-to-nearest value of x in `dtype` (F32 and quantized types: float as is).
float rounded_to(float x, DType dtype) {
  if (dtype == DType::kBF16) return bf16_to_f32(f32_to_bf16(x));
  if (dtype == DType::kF16) return f16_to_f32(f32_to_f16(x));
  return x;
}

void configure_gemma4(const ConfigReader& original, const Checkpoint& ckpt, ModelConfig& c) {
  // Newer transformers' per_layer_config form, read as the flat keys (see gemma4_flat_config).
  const nlohmann::json flat = gemma4_flat_config(original.json(), original.path());
  const ConfigReader reader(flat, original.path());
  // use_bidirectional_attention: "vision" lets the rows of one image see each other in
  // the sliding-window layers (ModelConfig::image_bidirectional; text stays causal); null
  // and false are causal everywhere. "all" (every token both ways) is refused.
  if (reader.has("use_bidirectional_attention")) {
    const nlohmann::json& b = reader.json().at("use_bidirectional_attention");
    c.image_bidirectional = b.is_string() && b.get<std::string>() == "vision";
    if (!(b.is_null() || (b.is_boolean() && !b.get<bool>()) || c.image_bidirectional))
      reader.error(ErrorKind::kUnsupported,
                   "use_bidirectional_attention {} is not supported (supported: null, \"vision\")", b.dump());
  }
  // The image prompt: <|image> <|image|>×N <image|> (top-level ids of
  // Gemma4ForConditionalGeneration's config; Gemma 3's *_token_index names as well).
  c.image_token_id = reader.get_int("image_token_id", reader.get_int("image_token_index", -1));
  c.vision_start_token_id = reader.get_int("boi_token_id", reader.get_int("boi_token_index", -1));
  c.vision_end_token_id = reader.get_int("eoi_token_id", reader.get_int("eoi_token_index", -1));
  c.pad_token_id = reader.get_int("pad_token_id", 0);
  // 26B-A4B: routed GeGLU experts beside every layer's dense MLP (softmax, top-k
  // renormalised, per-expert scale; gemma4_layer.cc).
  MlpSpec moe;
  if (reader.get_bool("enable_moe_block", false)) {
    moe.experts = reader.require_int("num_experts");
    moe.top_k = reader.require_int("top_k_experts");
    moe.expert_intermediate = reader.require_int("moe_intermediate_size");
    moe.per_expert_scale = true;
    moe.gelu = true;
    if (moe.experts <= 0 || moe.top_k <= 0 || moe.top_k > moe.experts)
      reader.error(ErrorKind::kBadInput, "top_k_experts ({}) must be in 1..num_experts ({})", moe.top_k, moe.experts);
    if (moe.expert_intermediate <= 0)
      reader.error(ErrorKind::kBadInput, "moe_intermediate_size must be positive, got {}", moe.expert_intermediate);
    c.routed_names.router = "router.proj";
    c.routed_names.per_expert_scale = "router.per_expert_scale";
    c.routed_names.experts = "experts";
  } else if (reader.get_int("num_experts", 0) > 0) {
    reader.error(ErrorKind::kBadInput, "num_experts is set but enable_moe_block is not");
  }
  const std::string act = reader.get_string("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    reader.error(ErrorKind::kUnsupported, "hidden_activation '{}' is not supported (supported: gelu_pytorch_tanh)", act);
  c.weight_prefix = ckpt.has("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  c.tie_word_embeddings = reader.get_bool("tie_word_embeddings", true);
  c.norm_offset = 0.0f;
  // Hugging Face multiplies by the scale cast to the embedding's dtype (in BF16 √1536 =
  // 39.19 becomes 39.25); GGUF's quantized tables (llama.cpp) and F32 use √H as is.
  const TensorView* embed = ckpt.find(c.weight_prefix + "embed_tokens.weight");
  c.embedding_scale = rounded_to(std::sqrt(float(c.hidden_size)), embed ? embed->dtype : DType::kF32);
  if (reader.has("final_logit_softcapping")) {
    c.final_logit_softcap = float(reader.get_double("final_logit_softcapping", 0.0));
    if (c.final_logit_softcap < 0) reader.error(ErrorKind::kBadInput, "final_logit_softcapping must be >= 0");
  }

  const int global_head_dim = reader.get_int("global_head_dim", 512);
  const bool k_eq_v = reader.get_bool("attention_k_eq_v", false);
  const int global_kv = reader.has("num_global_key_value_heads") ? reader.get_int("num_global_key_value_heads", 0)
                                                                  : c.num_kv_heads;
  const int window = reader.get_int("sliding_window", 512);
  const int shared = reader.get_int("num_kv_shared_layers", 0);
  const bool double_wide = reader.get_bool("use_double_wide_mlp", false);
  if (global_head_dim <= 0 || global_head_dim % 2 != 0)
    reader.error(ErrorKind::kBadInput, "global_head_dim must be positive and even, got {}", global_head_dim);
  if (window <= 0) reader.error(ErrorKind::kBadInput, "sliding_window must be positive, got {}", window);
  if (shared < 0 || shared >= c.num_layers)
    reader.error(ErrorKind::kBadInput, "num_kv_shared_layers ({}) must be in 0..{}", shared, c.num_layers - 1);
  if (k_eq_v && global_kv <= 0)
    reader.error(ErrorKind::kBadInput, "num_global_key_value_heads must be positive, got {}", global_kv);

  const RopeKind local = rope_kind(reader, "sliding_attention", reader.get_double("rope_local_base_freq", 1e4), 0.0);
  const RopeKind global = rope_kind(reader, "full_attention", reader.get_double("rope_theta", 1e6), 0.25);

  const std::vector<std::string> types = layer_types(reader, c.num_layers);
  const int first_shared = c.num_layers - shared;
  c.layers.clear();
  for (int i = 0; i < c.num_layers; ++i) {
    const bool full = types[size_t(i)] == "full_attention";
    LayerSpec l;
    l.mixer = full ? MixerKind::kAttention : MixerKind::kSlidingAttention;
    AttentionSpec& a = l.attention;
    a.heads = c.num_heads;
    a.kv_heads = full && k_eq_v ? global_kv : c.num_kv_heads;
    a.head_dim = full ? global_head_dim : c.head_dim;
    a.window = full ? 0 : window;
    a.rope_theta = full ? global.theta : local.theta;
    a.rotary_dim = a.head_dim;
    const double partial = full ? global.partial : local.partial;
    if (partial > 0) {
      a.rotary_pairs = int(partial * a.head_dim / 2);
      if (!(partial <= 1) || a.rotary_pairs < 1)
        reader.error(ErrorKind::kBadInput, "partial_rotary_factor {} gives {} rotated pairs of head_dim {}", partial,
                     a.rotary_pairs, a.head_dim);
    }
    a.qk_norm = true;
    a.value_is_key = full && k_eq_v;
    l.intermediate = c.intermediate_size * (double_wide && i >= first_shared ? 2 : 1);
    l.mlp = moe;
    if (i >= first_shared) {
      for (int j = first_shared - 1; j >= 0; --j)
        if (types[size_t(j)] == types[size_t(i)]) {
          a.kv_source = j;
          break;
        }
      if (a.kv_source < 0)
        reader.error(ErrorKind::kBadInput, "layer {} shares KV but no earlier non-shared {} layer exists", i,
                     types[size_t(i)]);
    }
    c.layers.push_back(l);
  }

  // Per-layer embeddings (E2B / E4B).
  const bool has_ple = ckpt.has(c.weight_prefix + "embed_tokens_per_layer.weight");
  c.per_layer_input_size = reader.has("hidden_size_per_layer_input")
                               ? reader.get_int("hidden_size_per_layer_input", 0)
                               : (has_ple ? 256 : 0);
  if (c.per_layer_input_size < 0)
    reader.error(ErrorKind::kBadInput, "hidden_size_per_layer_input must be >= 0, got {}", c.per_layer_input_size);
  c.per_layer_input_vocab = reader.get_int("vocab_size_per_layer_input", c.vocab_size);
  if (c.per_layer_input_size > 0 && c.per_layer_input_vocab <= 0)
    reader.error(ErrorKind::kBadInput, "vocab_size_per_layer_input must be positive");
}

std::unique_ptr<Block> make_gemma4_block(const ModelConfig& config, const LayerSpec& layer, WeightStore& store,
                                         const std::string& prefix) {
  Gemma4BlockOptions o;
  o.hidden = config.hidden_size;
  o.eps = float(config.rms_norm_eps);
  o.per_layer_input = config.per_layer_input_size;
  o.query_only = layer.attention.kv_source >= 0;  // KV-sharing layers have no K/V of their own
  o.routed_names = config.routed_names;
  o.image_bidirectional = config.image_bidirectional && layer.mixer == MixerKind::kSlidingAttention;
  return make_gemma4_layer(layer, o, store, prefix);
}

// Per-layer embeddings, for every layer at once:
//   e   = embed_tokens_per_layer[id] · √P                       -> [L, P]
//   p   = RMSNorm_w(per_layer_model_projection(x0) · H^-1/2)    per layer slice of P
//   ple = (p + e) · 2^-1/2
class PerLayerEmbeddings : public InputStage {
 public:
  PerLayerEmbeddings(const ModelConfig& c, WeightStore& s)
      : hidden_(c.hidden_size),
        layers_(c.num_layers),
        width_(c.per_layer_input_size),
        eps_(float(c.rms_norm_eps)),
        image_token_(c.image_token_id),
        pad_token_(c.pad_token_id) {
    const std::string& p = c.weight_prefix;
    const int64_t LP = int64_t(layers_) * width_;
    table_ = s.row_table(p + "embed_tokens_per_layer.weight", c.per_layer_input_vocab, LP);
    projection_ = s.matrix(p + "per_layer_model_projection.weight", LP, hidden_);
    norm_ = s.floats(p + "per_layer_projection_norm.weight", {width_});
  }
  int64_t stride() const override { return int64_t(layers_) * width_; }
  size_t bytes_per_row() const override {
    return dtype_row_bytes(table_.dtype, table_.cols) + size_t(projection_.rows) * dtype_row_bytes(projection_.dtype, projection_.cols);
  }
  void forward(const int32_t* tokens, const float* x0, int n_rows, float* out) override {
    const size_t LP = size_t(stride());
    proj_.resize(size_t(n_rows) * LP);
    matmul(projection_, x0, n_rows, proj_.data());
    const float proj_scale = 1.0f / std::sqrt(float(hidden_));
    for (float& v : proj_) v *= proj_scale;
    rms_norm(proj_.data(), norm_, int64_t(n_rows) * layers_, width_, eps_, proj_.data());
    // Image rows take pad_token_id's table row (as Hugging Face does at image positions);
    // their projection part above comes from the image features they carry.
    const int32_t* ids = tokens;
    if (image_token_ >= 0 && std::find(tokens, tokens + n_rows, image_token_) != tokens + n_rows) {
      ids_.assign(tokens, tokens + n_rows);
      std::replace(ids_.begin(), ids_.end(), image_token_, pad_token_);
      ids = ids_.data();
    }
    embed_rows(table_, ids, n_rows, out);
    const float e_scale = rounded_to(std::sqrt(float(width_)), table_.dtype), half = 1.0f / std::sqrt(2.0f);
    for (size_t i = 0; i < size_t(n_rows) * LP; ++i) out[i] = (proj_[i] + out[i] * e_scale) * half;
  }

 private:
  int hidden_, layers_, width_;
  float eps_;
  int32_t image_token_, pad_token_;  // image rows read pad_token_'s table row
  std::vector<int32_t> ids_;
  WeightMatrix table_;       // [per_layer_input_vocab, L * P], layer-major columns (served from the mapping)
  WeightMatrix projection_;  // [L * P, H]
  const float* norm_ = nullptr;  // [P]
  std::vector<float> proj_;
};

std::unique_ptr<InputStage> make_per_layer_embeddings(const ModelConfig& config, WeightStore& store) {
  if (config.per_layer_input_size <= 0) return nullptr;
  return std::make_unique<PerLayerEmbeddings>(config, store);
}

}  // namespace

std::string gemma4_layer_type(const std::string& name) {
  if (name == "sliding_attention" || name == "local_sliding" || name == "local") return "sliding_attention";
  if (name == "full_attention" || name == "global") return "full_attention";
  return "";
}

nlohmann::json gemma4_flat_config(const nlohmann::json& text, const std::string& path) {
  if (!text.is_object() || !text.contains("per_layer_config") || text["per_layer_config"].is_null()) return text;
  ConfigReader reader(text, path);
  const nlohmann::json& plc = text["per_layer_config"];
  if (!plc.is_object() && !plc.is_array())
    reader.error(ErrorKind::kBadInput, "key 'per_layer_config' must be an object of layer index -> overrides");
  const int n = reader.require_int("num_hidden_layers");
  const std::vector<std::string> types = layer_types(reader, n);
  nlohmann::json flat = text;
  flat.erase("per_layer_config");
  // What each full layer says, to be one value across them.
  int global_dim = -1, global_kv = -1;
  auto same = [&](int& slot, int v, const char* what) {
    if (slot >= 0 && slot != v)
      reader.error(ErrorKind::kUnsupported, "per_layer_config gives the full layers different {} ({} and {})", what, slot, v);
    slot = v;
  };
  for (int i = 0; i < n; ++i) {
    const nlohmann::json* entry = nullptr;
    if (plc.is_object() && plc.contains(std::to_string(i))) entry = &plc[std::to_string(i)];
    if (plc.is_array() && size_t(i) < plc.size()) entry = &plc[size_t(i)];
    if (!entry || entry->is_null()) continue;
    if (!entry->is_object()) reader.error(ErrorKind::kBadInput, "per_layer_config.{} must be an object", i);
    const bool full = types[size_t(i)] == "full_attention";
    for (const auto& [key, value] : entry->items()) {
      const bool known = key == "head_dim" || key == "num_key_value_heads" || key == "num_attention_heads";
      if (known && !value.is_number_integer())
        reader.error(ErrorKind::kBadInput, "per_layer_config.{}.{} must be an integer", i, key);
      if (full && key == "head_dim") {
        same(global_dim, value.get<int>(), "head dims");
      } else if (full && key == "num_key_value_heads") {
        same(global_kv, value.get<int>(), "key/value head counts");
      } else if (!(text.contains(key) && text[key] == value)) {
        // A sliding layer's own head geometry, a full layer's own query heads, or a key
        // nextn does not know: computing with the top-level value would be wrong.
        reader.error(ErrorKind::kUnsupported, "per_layer_config.{}.{} = {} ({} layer) is not supported{}", i, key,
                     value.dump(), types[size_t(i)],
                     text.contains(key) ? " (it differs from the top-level " + key + ")" : "");
      }
    }
  }
  auto lift = [&](const char* flat_key, int v) {
    if (v < 0) return;
    if (text.contains(flat_key) && !(text[flat_key].is_number_integer() && text[flat_key].get<int>() == v))
      reader.error(ErrorKind::kBadInput, "per_layer_config gives the full layers {} {} but {} is {}", flat_key, v, flat_key,
                   text[flat_key].dump());
    flat[flat_key] = v;
  };
  lift("global_head_dim", global_dim);
  if (global_kv >= 0 && global_kv != reader.get_int("num_key_value_heads", global_kv)) {
    // Full layers with their own key/value head count are the K=V form.
    if (!reader.get_bool("attention_k_eq_v", false))
      reader.error(ErrorKind::kUnsupported,
                   "per_layer_config gives the full layers {} key/value heads (num_key_value_heads is {}) without "
                   "attention_k_eq_v", global_kv, reader.get_int("num_key_value_heads", 0));
    lift("num_global_key_value_heads", global_kv);
  } else if (global_kv >= 0 && reader.get_bool("attention_k_eq_v", false)) {
    lift("num_global_key_value_heads", global_kv);
  }
  return flat;
}

const Architecture kGemma4Architecture = {"Gemma4ForCausalLM", "gemma4_text", configure_gemma4, make_gemma4_block,
                                          nullptr, make_per_layer_embeddings};
const Architecture kGemma4MultimodalArchitecture = {"Gemma4ForConditionalGeneration", "gemma4", configure_gemma4,
                                                    make_gemma4_block, nullptr, make_per_layer_embeddings};

}  // namespace nextn
