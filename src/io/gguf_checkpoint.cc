// io/gguf_checkpoint.cc — a GGUF model as a Checkpoint: split files, config.json
// derived from the metadata (llama.cpp's key names), tensors renamed to Hugging Face
// names, and llama's Q/K rows put back in Hugging Face order. Qwen3.5 (qwen35, and
// qwen35moe with its routed layers and sigmoid-gated shared expert): the converter's
// rewrites are undone where they are cheap (norms stored as 1 + w back to
// w, ssm_a = -exp(A_log) back to A_log, the squeezed conv reshaped, the MTP block
// blk.{n_layer}.* renamed to mtp.*); its tiled value-head order is kept and named in the
// derived config (linear_value_head_order), since a column permutation of ssm_out
// would cut K-quant blocks. Architectures with a dialect (io/gguf_dialect.h: gemma4)
// take their names and config.json from it instead.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>

#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/gguf_dialect.h"
#include "io/gguf_metadata.h"
#include "io/gguf_names.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace nextn {
namespace {

namespace fs = std::filesystem;

// general.architecture → (Hugging Face architecture, model_type).
const std::map<std::string, std::pair<std::string, std::string>>& known_architectures() {
  static const std::map<std::string, std::pair<std::string, std::string>> table = {
      {"llama", {"LlamaForCausalLM", "llama"}},
      {"qwen2", {"Qwen2ForCausalLM", "qwen2"}},
      {"qwen3", {"Qwen3ForCausalLM", "qwen3"}},
      {"glm4moe", {"Glm4MoeForCausalLM", "glm4_moe"}},
      {"qwen35", {"Qwen3_5ForCausalLM", "qwen3_5_text"}},
      {"qwen35moe", {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text"}},
  };
  return table;
}

// The files of a model: FILE-00001-of-0000N.gguf expands to all N splits.
std::vector<std::string> split_paths(const std::string& path) {
  static const std::regex split(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch m;
  const std::string name = fs::path(path).filename().string();
  if (!std::regex_match(name, m, split)) return {path};
  const int count = std::stoi(m[3].str());
  if (count < 1) fail(ErrorKind::kBadInput, "{}: split count 0 in the file name", path);
  std::vector<std::string> paths;
  for (int i = 1; i <= count; ++i) {
    char part[32];
    std::snprintf(part, sizeof(part), "-%05d-of-%05d.gguf", i, count);
    paths.push_back((fs::path(path).parent_path() / (m[1].str() + part)).string());
  }
  return paths;
}

// llama.cpp stores llama-architecture Q and K rows of each head interleaved (row
// 2j + s of a head is Hugging Face row s·head_dim/2 + j); this undoes it.
std::unique_ptr<uint8_t[]> unpermute_rows(const TensorView& t, int64_t n_heads) {
  const int64_t rows = t.shape[0];
  const int64_t head_dim = rows / n_heads;
  const size_t row_bytes = t.nbytes / static_cast<size_t>(rows);
  auto out = std::make_unique<uint8_t[]>(t.nbytes);
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t j = 0; j < head_dim / 2; ++j)
      for (int64_t s = 0; s < 2; ++s) {
        const int64_t hf_row = h * head_dim + s * (head_dim / 2) + j;
        const int64_t gguf_row = h * head_dim + 2 * j + s;
        std::memcpy(out.get() + hf_row * row_bytes, src + gguf_row * row_bytes, row_bytes);
      }
  return out;
}

// A qwen35 MTP tensor at layer index n_layer + i (as hf_name_from_gguf names it) → the
// Hugging Face mtp.* name; other names unchanged.
std::string qwen35_mtp_name(const std::string& hf, int64_t n_layers) {
  const std::string prefix = "model.layers.";
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
std::unique_ptr<uint8_t[]> map_floats(const TensorView& t, const std::string& gguf_name, const std::string& path, F f) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
    fail(ErrorKind::kUnsupported, "{}: tensor '{}' must be F32, F16 or BF16 (llama.cpp writes it F32)", path, gguf_name);
  const int64_t n = t.numel();
  auto out = std::make_unique<uint8_t[]>(size_t(n) * sizeof(float));
  float* y = reinterpret_cast<float*>(out.get());
  for (int64_t i = 0; i < n; ++i) y[i] = f(t.float_at(i));
  return out;
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open_gguf(const std::string& path) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = path;
  ckpt->tensor_source_ = path;
  const std::vector<std::string> paths = split_paths(path);
  for (const std::string& p : paths) {
    auto file = GgufFile::open(p);
    if (paths.size() > 1 && file->metadata().contains("split.count") &&
        file->metadata()["split.count"] != static_cast<uint64_t>(paths.size()))
      fail(ErrorKind::kBadInput, "{}: split.count is {} but the file name says {}", p,
           json_text(file->metadata()["split.count"]), paths.size());
    ckpt->gguf_files_.push_back(std::move(file));
  }
  size_t n_tensors = 0;
  for (const auto& file : ckpt->gguf_files_) n_tensors += file->tensors().size();
  if (n_tensors == 0) fail(ErrorKind::kBadInput, "{}: the file holds no tensors (a vocabulary-only GGUF is not a model)", path);
  const GgufFile& first = *ckpt->gguf_files_.front();
  const nlohmann::json& kv = first.metadata();
  if (!kv.contains("general.architecture") || !kv["general.architecture"].is_string())
    fail(ErrorKind::kBadInput, "{}: missing metadata key 'general.architecture'", path);
  const std::string arch = kv["general.architecture"].get<std::string>();
  const GgufMetadata md(kv, path, arch);
  std::map<std::string, std::string> owner;  // HF tensor name → file
  auto add = [&](const std::string& file_path, const std::string& gguf_name, TensorView view) {
    auto [it, inserted] = owner.emplace(view.name, file_path);
    if (!inserted) fail(ErrorKind::kBadInput, "{}: tensor '{}' is also stored in {}", file_path, gguf_name, it->second);
    ckpt->tensors_.push_back(std::move(view));
  };
  auto finish = [&]() {
    std::sort(ckpt->tensors_.begin(), ckpt->tensors_.end(),
              [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  };
  auto token_ids = [&]() {
    for (const char* key : {"bos_token_id", "eos_token_id"}) {
      const std::string full = std::string("tokenizer.ggml.") + key;
      if (kv.contains(full) && kv[full].is_number_integer()) ckpt->config_[key] = kv[full];
    }
    ckpt->generation_config_ = nlohmann::json::object();
  };

  if (const GgufDialect* dialect = gguf_dialect(arch)) {
    std::map<std::string, const TensorView*> by_gguf_name;
    for (const auto& file : ckpt->gguf_files_)
      for (const TensorView& t : file->tensors()) {
        by_gguf_name[t.name] = &t;
        TensorView view = t;
        view.name = dialect->hf_name(t.name);
        if (!view.name.empty()) add(file->path(), t.name, view);
      }
    finish();
    ckpt->config_ = dialect->config(md, by_gguf_name);
    token_ids();
    return ckpt;
  }
  auto known = known_architectures().find(arch);
  if (known == known_architectures().end()) {
    std::vector<std::string> names = gguf_dialect_archs();
    for (const auto& [name, hf] : known_architectures()) names.push_back(name);
    std::sort(names.begin(), names.end());
    std::string supported;
    for (const std::string& name : names) supported += (supported.empty() ? "" : ", ") + name;
    fail(ErrorKind::kUnsupported, "{}: GGUF architecture '{}' is not supported (supported: {})", path, arch, supported);
  }
  const bool qwen35 = is_qwen35_family(arch);

  // Heads, for llama's Q/K row order.
  const int64_t n_heads = md.integer("attention.head_count");
  const int64_t n_kv_heads = md.integer("attention.head_count_kv", n_heads);
  if (n_heads <= 0 || n_kv_heads <= 0)
    fail(ErrorKind::kBadInput, "{}: metadata key '{}.attention.head_count' must be positive", path, arch);

  const int64_t n_mtp = md.integer("nextn_predict_layers", 0);
  const int64_t blocks = md.integer("block_count");
  if (n_mtp < 0 || n_mtp >= blocks)
    fail(ErrorKind::kBadInput, "{}: metadata key '{}.nextn_predict_layers' ({}) must be below block_count ({})", path,
         arch, n_mtp, blocks);
  const int64_t n_layers = blocks - n_mtp;  // llama.cpp counts the MTP layers as blocks

  for (const auto& file : ckpt->gguf_files_)
    for (const TensorView& t : file->tensors()) {
      TensorView view = t;
      std::string hf = hf_name_from_gguf(t.name, arch);
      if (hf.empty()) continue;  // tensors the decoder never reads (rope_freqs is checked below)
      // The Qwen shared expert's gate is one row: converters store it [H] (squeezed) or
      // [1, H]; the model reads [1, H].
      if (t.name.ends_with(".ffn_gate_inp_shexp.weight") && t.shape.size() == 1) view.shape = {1, t.shape[0]};
      if (qwen35) {
        if (hf.starts_with("model.layers.")) hf = qwen35_mtp_name(hf, n_layers);
        const bool shifted_norm = t.name.ends_with("norm.weight") && !t.name.ends_with(".ssm_norm.weight");
        const bool neg_exp_a = t.name.ends_with(".ssm_a");
        if (shifted_norm || neg_exp_a) {
          if (neg_exp_a)
            for (int64_t i = 0; i < t.numel(); ++i)
              if (!(t.float_at(i) < 0.0f))
                fail(ErrorKind::kBadInput, "{}: tensor '{}' must hold -exp(A_log) < 0, element {} is {}", file->path(),
                     t.name, i, t.float_at(i));
          ckpt->owned_.push_back(shifted_norm ? map_floats(t, t.name, file->path(), [](float w) { return w - 1.0f; })
                                              : map_floats(t, t.name, file->path(), [](float a) { return std::log(-a); }));
          view.data = ckpt->owned_.back().get();
          view.dtype = DType::kF32;
          view.nbytes = size_t(t.numel()) * sizeof(float);
        }
        if (t.name.ends_with(".ssm_conv1d.weight")) {
          if (t.shape.size() != 2)
            fail(ErrorKind::kBadInput, "{}: tensor '{}' must be 2-D [channels, kernel], got {}", file->path(), t.name,
                 t.shape_string());
          view.shape = {t.shape[0], 1, t.shape[1]};
        }
      }
      view.name = hf;
      const bool is_q = t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_q.bias");
      const bool is_k = t.name.ends_with(".attn_k.weight") || t.name.ends_with(".attn_k.bias");
      if (arch == "llama" && (is_q || is_k)) {
        const int64_t heads = is_q ? n_heads : n_kv_heads;
        if (t.shape.empty() || t.shape[0] % (2 * heads) != 0)
          fail(ErrorKind::kBadInput, "{}: tensor '{}' has {} rows, not a multiple of 2 × {} heads", file->path(),
               t.name, t.shape.empty() ? 0 : t.shape[0], heads);
        ckpt->owned_.push_back(unpermute_rows(t, heads));
        view.data = ckpt->owned_.back().get();
      }
      add(file->path(), t.name, std::move(view));
    }
  finish();
  for (const auto& file : ckpt->gguf_files_)
    for (const TensorView& t : file->tensors())
      if (t.name == "rope_freqs.weight")
        fail(ErrorKind::kUnsupported, "{}: tensor 'rope_freqs.weight' (per-frequency RoPE factors) is not supported",
             file->path());

  // config.json in Hugging Face terms.
  nlohmann::json& c = ckpt->config_;
  c = nlohmann::json::object();
  c["architectures"] = nlohmann::json::array({known->second.first});
  c["model_type"] = known->second.second;
  c["num_hidden_layers"] = n_layers;
  if (n_mtp > 0) c[qwen35 ? "mtp_num_hidden_layers" : "num_nextn_predict_layers"] = n_mtp;
  c["hidden_size"] = md.integer("embedding_length");
  // qwen35moe has no dense MLP: its converter writes the key only when the config has
  // an intermediate_size.
  if (arch != "qwen35moe" || md.has("feed_forward_length")) c["intermediate_size"] = md.integer("feed_forward_length");
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
         "linear)", path, arch, scaling);
  }
  const TensorView* embed = ckpt->find("model.embed_tokens.weight");
  if (!embed) fail(ErrorKind::kBadInput, "{}: missing tensor 'token_embd.weight'", path);
  if (embed->shape.size() != 2) fail(ErrorKind::kBadInput, "{}: tensor 'token_embd.weight' is not 2-D", path);
  c["vocab_size"] = embed->shape[0];
  // Tied embeddings are decided by the tensors present (a file may lack output.weight).
  c["tie_word_embeddings"] = ckpt->find("lm_head.weight") == nullptr;
  // Attention biases, from any layer: an MTP-only file (llama.cpp's split form) has no
  // layer 0, only the MTP block.
  bool q_bias = false;
  for (const TensorView& t : ckpt->tensors_) q_bias |= t.name.ends_with(".self_attn.q_proj.bias");
  if (arch == "glm4moe") {
    // Routed layers (llama.cpp's keys); rope.dimension_count is the partial rotary width.
    c["n_routed_experts"] = md.integer("expert_count");
    c["num_experts_per_tok"] = md.integer("expert_used_count");
    c["moe_intermediate_size"] = md.integer("expert_feed_forward_length");
    c["n_shared_experts"] = md.integer("expert_shared_count", 0);
    c["first_k_dense_replace"] = md.integer("leading_dense_block_count", 0);
    c["routed_scaling_factor"] = md.number("expert_weights_scale", 1.0);
    const std::string norm_key = arch + ".expert_weights_norm";
    c["norm_topk_prob"] = !kv.contains(norm_key) || (kv[norm_key].is_boolean() && kv[norm_key].get<bool>());
    const int64_t gating = md.integer("expert_gating_func", 2);
    if (gating != 2)
      fail(ErrorKind::kUnsupported, "{}: metadata key '{}.expert_gating_func' = {} is not supported (supported: 2, sigmoid)",
           path, arch, gating);
    const int64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<int64_t>() : c["hidden_size"].get<int64_t>() / n_heads;
    const int64_t rotary = md.integer("rope.dimension_count", head_dim);
    c["partial_rotary_factor"] = double(rotary) / double(head_dim);
    c["attention_bias"] = q_bias;
  }
  if (arch == "qwen35moe") {
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
      fail(ErrorKind::kUnsupported, "{}: metadata key '{}.expert_gating_func' = {} is not supported (supported: 1, softmax)",
           path, arch, gating);
    const std::string norm_key = arch + ".expert_weights_norm";
    if (kv.contains(norm_key) && !(kv[norm_key].is_boolean() && kv[norm_key].get<bool>()))
      fail(ErrorKind::kUnsupported, "{}: metadata key '{}' must be true (llama.cpp renormalises the top-k weights)", path,
           norm_key);
    const double scale = md.number("expert_weights_scale", 1.0);
    if (scale != 0.0 && scale != 1.0)
      fail(ErrorKind::kUnsupported, "{}: metadata key '{}.expert_weights_scale' = {} is not supported (supported: 1)",
           path, arch, scale);
    c["norm_topk_prob"] = true;
  }
  if (qwen35) {
    // Gated DeltaNet widths (llama.cpp: state_size = dk, group_count = Hk, time_step_rank
    // = Hv, inner_size = Hv·dv), the layer pattern, and the partial rotary width.
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
    const int64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<int64_t>() : c["hidden_size"].get<int64_t>() / n_heads;
    c["partial_rotary_factor"] = double(md.integer("rope.dimension_count")) / double(head_dim);
    c["attn_output_gate"] = true;
  }
  if (arch == "qwen2" && !q_bias)
    fail(ErrorKind::kUnsupported, "{}: qwen2 architecture without attention biases is not supported", path);
  token_ids();
  return ckpt;
}

}  // namespace nextn
