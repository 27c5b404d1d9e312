// model/config.cc — config.json (+ generation_config.json) -> ModelConfig: picks the
// architecture from the registry, parses and validates the common keys.
#include <filesystem>
#include <string>

#include "io/checkpoint.h"
#include "model/architecture.h"
#include "util/log.h"

namespace nextn {
namespace {

const Architecture& pick_architecture(const ConfigReader& reader) {
  std::string wanted;
  if (reader.has("architectures")) {
    const nlohmann::json& list = reader.json().at("architectures");
    if (!list.is_array() || list.empty() || !list[0].is_string())
      reader.error(ErrorKind::kBadInput, "key 'architectures' must be a non-empty list of names");
    wanted = list[0].get<std::string>();
    for (const Architecture* a : architectures())
      if (wanted == a->name) return *a;
  } else if (reader.has("model_type")) {
    wanted = reader.get_string("model_type", "");
    for (const Architecture* a : architectures())
      if (wanted == a->model_type) return *a;
  } else {
    reader.error(ErrorKind::kBadInput, "missing key 'architectures'");
  }
  std::string supported;
  for (const Architecture* a : architectures()) supported += (supported.empty() ? "" : ", ") + std::string(a->name);
  reader.error(ErrorKind::kUnsupported, "unsupported architecture '{}' (supported: {})", wanted, supported);
}

// An int or a list of ints ("eos_token_id": 2 or [2, 7]), each a token id of the vocabulary.
std::vector<int> token_id_list(const ConfigReader& reader, const std::string& key, int vocab_size) {
  std::vector<int> ids;
  if (!reader.has(key)) return ids;
  const nlohmann::json& v = reader.json().at(key);
  auto id = [&](const nlohmann::json& x) {
    if (!x.is_number_integer()) reader.error(ErrorKind::kBadInput, "key '{}' must hold integers, got {}", key, v.dump());
    int64_t n = x.get<int64_t>();
    if (n < 0 || n >= vocab_size)
      reader.error(ErrorKind::kBadInput, "key '{}': token id {} is outside the vocabulary (0..{})", key, x.dump(),
                   vocab_size - 1);
    return int(n);
  };
  if (v.is_number_integer()) {
    ids.push_back(id(v));
  } else if (v.is_array()) {
    for (const auto& x : v) ids.push_back(id(x));
  } else {
    reader.error(ErrorKind::kBadInput, "key '{}' must be an integer or a list of integers, got {}", key, v.dump());
  }
  return ids;
}

void require_positive(const ConfigReader& reader, const char* key, int value) {
  if (value <= 0) reader.error(ErrorKind::kBadInput, "key '{}' must be positive, got {}", key, value);
}

}  // namespace

double rope_parameter(const ConfigReader& reader, const char* key, double fallback) {
  if (reader.has("rope_parameters")) {
    const nlohmann::json& rp = reader.json().at("rope_parameters");
    if (!rp.is_object()) reader.error(ErrorKind::kBadInput, "key 'rope_parameters' must be an object");
    ConfigReader sub(rp, reader.path() + " rope_parameters");
    if (sub.has(key)) return sub.get_double(key, fallback);
  }
  return reader.get_double(key, fallback);
}

void parse_rope_scaling(const ConfigReader& reader, ModelConfig& config) {
  // Newer transformers keep the scaling in rope_parameters (beside rope_theta); older
  // configs in rope_scaling.
  const char* key = reader.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (!reader.has(key)) return;
  const nlohmann::json& rs = reader.json().at(key);
  if (!rs.is_object()) reader.error(ErrorKind::kBadInput, "key '{}' must be an object or null", key);
  ConfigReader sub(rs, reader.path() + " " + key);
  std::string type = sub.get_string("rope_type", sub.get_string("type", "default"));
  if (type == "default") return;
  if (type != "llama3" && type != "linear")
    reader.error(ErrorKind::kUnsupported, "rope_scaling type '{}' is not supported (supported: llama3, linear)", type);
  config.rope_scaling.type = type;
  config.rope_scaling.factor = sub.get_double("factor", 1.0);
  if (config.rope_scaling.factor <= 0) reader.error(ErrorKind::kBadInput, "rope_scaling factor must be positive");
  if (type == "llama3") {
    config.rope_scaling.low_freq_factor = sub.get_double("low_freq_factor", 1.0);
    config.rope_scaling.high_freq_factor = sub.get_double("high_freq_factor", 4.0);
    config.rope_scaling.original_max_position_embeddings = sub.get_int("original_max_position_embeddings", 8192);
    if (config.rope_scaling.high_freq_factor <= config.rope_scaling.low_freq_factor)
      reader.error(ErrorKind::kBadInput, "rope_scaling high_freq_factor must exceed low_freq_factor");
  }
}

MtpNames mimo_mtp_names() {
  MtpNames m;
  m.head = m.block = "model.mtp_layers.{i}.";
  m.hidden_norm = "hidden_layernorm.weight";
  m.token_norm = "token_layernorm.weight";
  m.proj = "input_proj";
  m.out_norm = "final_layernorm.weight";
  m.hidden_first = true;
  return m;
}

MtpNames deepseek_mtp_names() {
  MtpNames m;
  m.head = m.block = "model.layers.{i}.";
  m.hidden_norm = "hnorm.weight";
  m.token_norm = "enorm.weight";
  m.proj = "eh_proj";
  m.out_norm = "shared_head.norm.weight";
  m.shared_head = "shared_head.head.weight";
  m.after_trunk = true;
  return m;
}

MtpNames qwen35_mtp_names(const std::string& prefix) {
  MtpNames m;
  m.head = prefix;  // one set of norms and fc, shared by the head's layers
  m.block = prefix + "layers.{i}.";
  m.hidden_norm = "pre_fc_norm_hidden.weight";
  m.token_norm = "pre_fc_norm_embedding.weight";
  m.proj = "fc";
  m.out_norm = "norm.weight";
  return m;
}

int count_mimo_mtp_layers(const Checkpoint& ckpt) {
  int n = 0;
  while (ckpt.has("model.mtp_layers." + std::to_string(n) + ".input_proj.weight")) ++n;
  return n;
}

const char* mixer_kind_name(MixerKind kind) {
  switch (kind) {
    case MixerKind::kAttention: return "full_attention";
    case MixerKind::kSlidingAttention: return "sliding_attention";
    case MixerKind::kGatedDeltaNet: return "linear_attention";
  }
  return "?";
}

void fill_uniform_layers(ModelConfig& c) {
  c.layers.assign(size_t(c.num_layers), LayerSpec{});
  for (LayerSpec& l : c.layers) {
    l.mixer = MixerKind::kAttention;
    l.attention.heads = c.num_heads;
    l.attention.kv_heads = c.num_kv_heads;
    l.attention.head_dim = c.head_dim;
    l.attention.rope_theta = c.rope_theta;
    l.attention.rotary_dim = c.head_dim;
    l.attention.qkv_bias = c.qkv_bias;
    l.attention.qk_norm = c.qk_norm;
    l.intermediate = c.intermediate_size;
  }
}

namespace {

// A vision-language config keeps the text model under text_config: its keys win over
// the top level (architectures stays the top level's).
nlohmann::json text_part(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("text_config") || !config["text_config"].is_object()) return config;
  nlohmann::json merged = config;
  for (const auto& [key, value] : config["text_config"].items())
    if (key != "architectures" && !value.is_null()) merged[key] = value;
  merged.erase("text_config");
  return merged;
}

// Per-layer specifications agree with the model (an architecture's configure() may get them wrong).
void check_layers(const ConfigReader& reader, const ModelConfig& c) {
  if (int(c.layers.size()) != c.num_layers)
    reader.error(ErrorKind::kBadInput, "{} layer specifications for {} layers", c.layers.size(), c.num_layers);
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerSpec& l = c.layers[i];
    if (l.intermediate <= 0) reader.error(ErrorKind::kBadInput, "layer {}: MLP width must be positive", i);
    const MlpSpec& m = l.mlp;
    if (m.routed() && (m.top_k <= 0 || m.top_k > m.experts || m.expert_intermediate <= 0 || m.shared_intermediate < 0))
      reader.error(ErrorKind::kBadInput, "layer {}: {} experts, top-{}, expert width {}, shared width {} do not make a routed MLP",
                   i, m.experts, m.top_k, m.expert_intermediate, m.shared_intermediate);
    if (l.mixer == MixerKind::kGatedDeltaNet) continue;
    const AttentionSpec& a = l.attention;
    if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
      reader.error(ErrorKind::kBadInput, "layer {}: {} attention heads are not a multiple of {} key/value heads", i,
                   a.heads, a.kv_heads);
    if (a.head_dim <= 0 || a.rotary_dim <= 0 || a.rotary_dim > a.head_dim || a.rotary_dim % 2 != 0)
      reader.error(ErrorKind::kBadInput, "layer {}: rotary dims {} do not fit head_dim {}", i, a.rotary_dim, a.head_dim);
    if (l.mixer == MixerKind::kSlidingAttention && a.window <= 0)
      reader.error(ErrorKind::kBadInput, "layer {}: sliding window must be positive, got {}", i, a.window);
    if (a.kv_source >= 0) {
      // The donor is an earlier layer with its own KV of the same kind and shape.
      if (a.kv_source >= int(i))
        reader.error(ErrorKind::kBadInput, "layer {} reads the KV of layer {}, which is not earlier", i, a.kv_source);
      const LayerSpec& d = c.layers[size_t(a.kv_source)];
      if (d.mixer != l.mixer || d.attention.kv_source >= 0 || d.attention.kv_heads != a.kv_heads ||
          d.attention.head_dim != a.head_dim || d.attention.window != a.window)
        reader.error(ErrorKind::kBadInput, "layer {} reads the KV of layer {}, whose kind or shape differs", i,
                     a.kv_source);
    }
  }
}

}  // namespace

ModelConfig parse_model_config(const Checkpoint& ckpt) {
  const std::string path = (std::filesystem::path(ckpt.dir()) / "config.json").string();
  const nlohmann::json config_json = text_part(ckpt.config());
  ConfigReader reader(config_json, path);
  const Architecture& arch = pick_architecture(reader);
  if (arch.unsupported) reader.error(ErrorKind::kUnsupported, "architecture '{}': {}", arch.name, arch.unsupported);

  ModelConfig c;
  c.architecture = arch.name;
  c.model_type = reader.get_string("model_type", arch.model_type);
  c.vocab_size = reader.require_int("vocab_size");
  c.hidden_size = reader.require_int("hidden_size");
  // MoE-only configs (qwen3_5_moe) have no dense width: the experts' width stands in.
  const bool routed_only = !reader.has("intermediate_size") && reader.has("num_experts");
  c.intermediate_size = reader.require_int(routed_only ? "moe_intermediate_size" : "intermediate_size");
  c.num_layers = reader.require_int("num_hidden_layers");
  c.num_heads = reader.require_int("num_attention_heads");
  require_positive(reader, "vocab_size", c.vocab_size);
  require_positive(reader, "hidden_size", c.hidden_size);
  require_positive(reader, "intermediate_size", c.intermediate_size);
  require_positive(reader, "num_hidden_layers", c.num_layers);
  require_positive(reader, "num_attention_heads", c.num_heads);
  c.num_kv_heads = reader.get_int("num_key_value_heads", c.num_heads);
  require_positive(reader, "num_key_value_heads", c.num_kv_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    reader.error(ErrorKind::kBadInput, "num_attention_heads ({}) is not a multiple of num_key_value_heads ({})",
                 c.num_heads, c.num_kv_heads);
  if (reader.has("head_dim")) {
    c.head_dim = reader.get_int("head_dim", 0);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      reader.error(ErrorKind::kBadInput, "hidden_size ({}) is not a multiple of num_attention_heads ({}) and no head_dim",
                   c.hidden_size, c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  require_positive(reader, "head_dim", c.head_dim);
  if (c.head_dim % 2 != 0) reader.error(ErrorKind::kBadInput, "head_dim must be even for RoPE, got {}", c.head_dim);
  c.rms_norm_eps = reader.get_double("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) reader.error(ErrorKind::kBadInput, "key 'rms_norm_eps' must be positive");
  // Top level (older transformers) or inside rope_parameters (newer ones save it there).
  c.rope_theta = rope_parameter(reader, "rope_theta", 10000.0);
  if (!(c.rope_theta > 0)) reader.error(ErrorKind::kBadInput, "key 'rope_theta' must be positive");
  c.max_position_embeddings = reader.get_int("max_position_embeddings", 4096);
  c.tie_word_embeddings = reader.get_bool("tie_word_embeddings", false);
  std::string act = reader.get_string("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    reader.error(ErrorKind::kUnsupported, "hidden_act '{}' is not supported (supported: silu)", act);

  arch.configure(reader, ckpt, c);
  if (c.layers.empty()) fill_uniform_layers(c);
  check_layers(reader, c);

  // MTP layers in the DeepSeek layout (model.layers.{L+i}.*), for any backbone.
  if (c.mtp_layout == MtpLayout::kNone && reader.get_int("num_nextn_predict_layers", 0) > 0) {
    int n = reader.get_int("num_nextn_predict_layers", 0);
    if (ckpt.has("model.layers." + std::to_string(c.num_layers) + ".eh_proj.weight")) {
      c.mtp_layout = MtpLayout::kDeepSeek;
      c.mtp_names = deepseek_mtp_names();
      c.num_mtp_layers = n;
    } else if (ckpt.has("model.mtp_layers.0.input_proj.weight")) {
      c.mtp_layout = MtpLayout::kMiMo;
      c.mtp_names = mimo_mtp_names();
      c.num_mtp_layers = n;
    } else {
      log_warn("{}: num_nextn_predict_layers is {} but the checkpoint has no MTP tensors; MTP disabled", path, n);
    }
  }

  // eos/bos: generation_config.json wins over config.json.
  ConfigReader gen(ckpt.generation_config(),
                   (std::filesystem::path(ckpt.dir()) / "generation_config.json").string());
  c.eos_token_ids = token_id_list(gen, "eos_token_id", c.vocab_size);
  if (c.eos_token_ids.empty()) c.eos_token_ids = token_id_list(reader, "eos_token_id", c.vocab_size);
  std::vector<int> bos = token_id_list(gen, "bos_token_id", c.vocab_size);
  if (bos.empty()) bos = token_id_list(reader, "bos_token_id", c.vocab_size);
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  return c;
}

}  // namespace nextn
