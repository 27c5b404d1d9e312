// cli/quantize.cc — `nextn quantize SRC --type T --out FILE.gguf`: a BF16/F16/F32
// Hugging Face checkpoint to a GGUF file that nextn and llama.cpp-style readers load.
//
// Type recipe (llama.cpp's choices): 1-D tensors (norms, biases) and MoE routers stay F32; q8_0 / q4_0
// / q6_k use that type for every matrix; q4_k_m uses Q4_K with Q6_K for attn_v and
// ffn_down in the "more bits" layers; the output matrix (or the tied embedding) is
// Q6_K except for q8_0. A matrix whose rows are not a multiple of 256 falls back
// (Q4_K → Q5_0, Q6_K → Q8_0), and one not a multiple of 32 stays F16.
// MTP layers are written as llama.cpp's blk.{n_layer + i}.nextn.* tensors; MiMo's
// input_proj([h; e]) becomes eh_proj([e; h]) by swapping its column halves. --no-mtp and
// --mtp-only write llama.cpp's split form instead: the trunk alone (block_count n_layer),
// or the MTP blocks with token_embd, output_norm and output (block_count and
// nextn_predict_layers as in the whole file).
// Mixture of Experts: the per-expert matrices mlp.experts.{e}.{gate,up,down}_proj of a
// layer are stacked into one [E, rows, cols] tensor blk.N.ffn_{gate,up,down}_exps, as
// llama.cpp stores them, with the expert_* metadata keys; a fused experts.gate_up_proj
// [E, 2I, H] is split into ffn_gate_exps (rows [0, I) of each expert) and ffn_up_exps
// (rows [I, 2I)), as the converter does. Routers (ffn_gate_inp) and the Qwen shared
// expert's gate (ffn_gate_inp_shexp, [1, H]) stay F32. glm4moe: sigmoid router keys
// (expert_gating_func 2, expert_weights_scale, leading_dense_block_count); qwen35moe:
// softmax router (expert_gating_func 1), expert_shared_feed_forward_length, every layer
// routed.
// Qwen3.5 (qwen35, qwen35moe) as llama.cpp's converter writes it: every RMSNorm scale but the
// DeltaNet's stored as 1 + w, A_log as ssm_a = -exp(A_log), the conv squeezed to
// [channels, K] (kept F32), the value heads reordered from grouped by key head to tiled
// (rows of attn_qkv's v part, attn_gate, ssm_beta, ssm_alpha, ssm_dt, ssm_a, the conv's
// v channels; columns of ssm_out), mtp.* as blk.{n_layer}.nextn.* and the MTP layer's
// own attn_* / ffn_* tensors at block n_layer, the ssm.* / full_attention_interval keys.
// An architecture with a GGUF dialect (io/gguf_dialect.h; Gemma 4) takes its names,
// metadata keys and added tensors (rope_freqs) from it instead of the tables above.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/gguf_tokenizer_metadata.h"
#include "io/checkpoint.h"
#include "io/gguf_dialect.h"
#include "io/gguf_names.h"
#include "io/gguf_writer.h"
#include "kernels/kernels.h"
#include "kernels/weight_format.h"
#include "model/architecture.h"
#include "util/error.h"

namespace nextn {
namespace {

struct QuantizeFlags {
  std::string src;
  std::string type = "q8_0";
  std::string out;
  bool progress = true;
  // llama.cpp's split form of a model with MTP layers (its converter's --no-mtp / --mtp):
  // the trunk without them, or only them with copies of the embedding, final norm and head.
  bool no_mtp = false;
  bool mtp_only = false;
};

struct Planned {
  std::string src_name;   // Hugging Face name in the source checkpoint
  std::string gguf_name;  // blk.N.attn_q.weight
  DType dtype = DType::kF32;  // what to write
  bool swap_halves = false;   // MiMo input_proj → eh_proj
  int permute_heads = 0;      // llama Q/K row interleave (0: none)
  struct Part {
    std::string name;    // source tensor
    int64_t expert = -1;  // of a 3-D [E, R, C] source: expert `expert`'s rows [row0, row0 + rows); -1: all of it
    int64_t row0 = 0, rows = 0;
  };
  std::vector<Part> parts;  // stacked experts: the [rows, cols] source of each expert, in order
  std::vector<int64_t> shape;      // what is written
  // Qwen3.5 rewrites (llama.cpp's converter), applied in this order:
  bool add_one = false;            // RMSNorm scale w → 1 + w
  bool neg_exp = false;            // A_log → -exp(A_log)
  int64_t v_rows_from = -1;        // rows from here on are value heads of v_head_rows rows: grouped → tiled
  int64_t v_head_rows = 0;
  bool v_columns = false;          // the columns are value heads of v_head_rows columns: grouped → tiled
  int v_key_heads = 0, v_value_heads = 0;
  std::vector<float> generated;    // a tensor the dialect computes (F32), instead of a source
};

// Grouped value head g·r + j (r = Hv / Hk) → tiled position j·Hk + g; each head is
// `unit` consecutive floats of x.
void tile_value_heads(float* x, int key_heads, int value_heads, int64_t unit) {
  const int r = value_heads / key_heads;
  std::vector<float> y(size_t(value_heads) * unit);
  for (int g = 0; g < key_heads; ++g)
    for (int j = 0; j < r; ++j)
      std::copy_n(x + (int64_t(g) * r + j) * unit, unit, y.begin() + (int64_t(j) * key_heads + g) * unit);
  std::copy(y.begin(), y.end(), x);
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

DType fallback(DType t, int64_t cols) {
  if (cols % 256 != 0) {
    if (t == DType::kQ4_K) t = DType::kQ5_0;
    else if (t == DType::kQ5_K) t = DType::kQ5_1;
    else if (t == DType::kQ6_K) t = DType::kQ8_0;
  }
  if (is_quantized(t) && cols % 32 != 0) t = DType::kF16;
  return t;
}

// MiMo MTP names (model.mtp_layers.i.*) → DeepSeek-layout names at layer L + i.
std::string deepseek_mtp_name(const std::string& name, int num_layers, bool& swap) {
  swap = false;
  const std::string prefix = "model.mtp_layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return name;
  const size_t dot = name.find('.', prefix.size());
  const int i = std::stoi(name.substr(prefix.size(), dot - prefix.size()));
  std::string rest = name.substr(dot + 1);
  if (rest == "token_layernorm.weight") rest = "enorm.weight";
  else if (rest == "hidden_layernorm.weight") rest = "hnorm.weight";
  else if (rest == "final_layernorm.weight") rest = "shared_head.norm.weight";
  else if (rest == "input_proj.weight") rest = "eh_proj.weight", swap = true;
  else if (rest == "input_proj.bias") fail(ErrorKind::kUnsupported, "{}: GGUF has no name for an MTP input_proj bias", name);
  return "model.layers." + std::to_string(num_layers + i) + "." + rest;
}

const char* gguf_arch(const ModelConfig& c) {
  if (c.architecture == "LlamaForCausalLM") return "llama";
  if (c.architecture == "Qwen2ForCausalLM" || c.architecture == "MiMoForCausalLM") return "qwen2";
  if (c.architecture == "Qwen3ForCausalLM") return "qwen3";
  if (c.architecture == "Glm4MoeForCausalLM") return "glm4moe";
  if (c.architecture == "Qwen3_5ForCausalLM" || c.architecture == "Qwen3_5ForConditionalGeneration") return "qwen35";
  if (c.architecture == "Qwen3_5MoeForCausalLM" || c.architecture == "Qwen3_5MoeForConditionalGeneration")
    return "qwen35moe";
  fail(ErrorKind::kUnsupported, "quantize: architecture {} has no GGUF mapping", c.architecture);
}

// Expert e's rows [row0, row0 + rows) of a 3-D [E, R, C] float tensor, as a [rows, C] view.
TensorView expert_rows(const TensorView& t, int64_t e, int64_t row0, int64_t rows) {
  TensorView v = t;
  const size_t row_bytes = size_t(t.shape[2]) * dtype_size(t.dtype);
  v.data = static_cast<const uint8_t*>(t.data) + size_t(e * t.shape[1] + row0) * row_bytes;
  v.shape = {rows, t.shape[2]};
  v.nbytes = size_t(rows) * row_bytes;
  return v;
}

// The tensor as float32 rows, rearranged as planned.
std::vector<float> source_floats(const TensorView& t, const Planned& p) {
  const int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1;
  const int64_t cols = t.numel() / std::max<int64_t>(1, rows);
  std::vector<float> x(static_cast<size_t>(t.numel()));
  convert_row(t.dtype, t.data, t.numel(), x.data());
  if (p.swap_halves) {
    for (int64_t r = 0; r < rows; ++r) std::rotate(x.begin() + r * cols, x.begin() + r * cols + cols / 2, x.begin() + (r + 1) * cols);
  }
  if (p.permute_heads > 0) {
    // Hugging Face row s·head_dim/2 + j of a head → GGUF row 2j + s (llama.cpp's permute).
    std::vector<float> y(x.size());
    const int64_t head_dim = rows / p.permute_heads;
    for (int64_t h = 0; h < p.permute_heads; ++h)
      for (int64_t j = 0; j < head_dim / 2; ++j)
        for (int64_t s = 0; s < 2; ++s)
          std::copy_n(x.begin() + (h * head_dim + s * (head_dim / 2) + j) * cols, cols,
                      y.begin() + (h * head_dim + 2 * j + s) * cols);
    x.swap(y);
  }
  if (p.add_one)
    for (float& v : x) v += 1.0f;
  if (p.neg_exp)
    for (float& v : x) v = -std::exp(v);
  if (p.v_rows_from >= 0 || p.v_columns) {
    // The written shape: [rows, cols], or 1-D (one float per row).
    const int64_t w_rows = p.shape[0];
    const int64_t w_cols = int64_t(x.size()) / w_rows;
    if (p.v_rows_from >= 0) {
      tile_value_heads(x.data() + p.v_rows_from * w_cols, p.v_key_heads, p.v_value_heads, p.v_head_rows * w_cols);
    } else {
      for (int64_t r = 0; r < w_rows; ++r) tile_value_heads(x.data() + r * w_cols, p.v_key_heads, p.v_value_heads, p.v_head_rows);
    }
  }
  return x;
}

// A Qwen3.5 Hugging Face name → the DeepSeek-layout name llama.cpp's converter gives it
// before its table: the language model's prefix dropped, mtp.* at layer L + i.
std::string qwen35_layer_name(const std::string& stored, int num_layers) {
  // The head as model.mtp.* (or under the language model) is the same as mtp.*.
  std::string name = stored;
  for (const std::string prefix : {"model.language_model.mtp.", "model.mtp."})
    if (name.compare(0, prefix.size(), prefix) == 0) name = "mtp." + name.substr(prefix.size());
  const std::string vl = "model.language_model.";
  if (name.compare(0, vl.size(), vl) == 0) return "model." + name.substr(vl.size());
  static const std::map<std::string, std::string> head = {
      {"mtp.fc.weight", "eh_proj.weight"},
      {"mtp.pre_fc_norm_embedding.weight", "enorm.weight"},
      {"mtp.pre_fc_norm_hidden.weight", "hnorm.weight"},
      {"mtp.norm.weight", "shared_head.norm.weight"}};
  if (auto it = head.find(name); it != head.end()) return "model.layers." + std::to_string(num_layers) + "." + it->second;
  const std::string layers = "mtp.layers.";
  if (name.compare(0, layers.size(), layers) == 0) {
    const size_t dot = name.find('.', layers.size());
    const int i = std::stoi(name.substr(layers.size(), dot - layers.size()));
    return "model.layers." + std::to_string(num_layers + i) + name.substr(dot);
  }
  return name;
}

// The Qwen3.5 rewrites of one tensor (see the file comment).
void plan_qwen35(const ModelConfig& c, Planned& p) {
  const std::string& g = p.gguf_name;
  p.add_one = g.ends_with("norm.weight") && !g.ends_with(".ssm_norm.weight");
  p.neg_exp = g.ends_with(".ssm_a");
  if (g.ends_with(".ssm_conv1d.weight")) p.shape = {p.shape[0], p.shape.back()};  // [C, 1, K] → [C, K]
  const int layer = g.compare(0, 4, "blk.") == 0 ? std::stoi(g.substr(4)) : -1;
  if (layer < 0 || layer >= c.num_layers || c.layers[size_t(layer)].mixer != MixerKind::kGatedDeltaNet) return;
  const DeltaNetSpec& d = c.layers[size_t(layer)].delta_net;
  if (d.key_heads == d.value_heads) return;
  p.v_key_heads = d.key_heads;
  p.v_value_heads = d.value_heads;
  const int64_t qk = 2 * int64_t(d.key_heads) * d.key_dim;
  if (g.ends_with(".attn_qkv.weight") || g.ends_with(".ssm_conv1d.weight")) p.v_rows_from = qk, p.v_head_rows = d.value_dim;
  else if (g.ends_with(".attn_gate.weight")) p.v_rows_from = 0, p.v_head_rows = d.value_dim;
  else if (g.ends_with(".ssm_beta.weight") || g.ends_with(".ssm_alpha.weight") || g.ends_with(".ssm_a") ||
           g.ends_with(".ssm_dt.bias"))
    p.v_rows_from = 0, p.v_head_rows = 1;
  else if (g.ends_with(".ssm_out.weight")) p.v_columns = true, p.v_head_rows = d.value_dim;
}

// Qwen3.5's layer pattern as llama.cpp's one key: every interval-th layer is attention.
int full_attention_interval(const ModelConfig& c) {
  for (int k = 1; k <= c.num_layers; ++k) {
    bool ok = true;
    for (int i = 0; i < c.num_layers && ok; ++i)
      ok = (c.layers[size_t(i)].mixer == MixerKind::kAttention) == ((i + 1) % k == 0);
    if (ok) return k;
  }
  fail(ErrorKind::kUnsupported, "quantize: these layer_types are not every n-th layer full attention, "
       "which is all GGUF's full_attention_interval can say");
}

void print_progress(size_t done, size_t total, const std::string& name, DType t) {
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<size_t>(1, total));
  std::fprintf(stderr, "\r[%s%s] %zu/%zu %-40s %-5s", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), done, total, name.c_str(), dtype_name(t));
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// The <arch>.* keys of the families without a dialect (llama, qwen2, qwen3, glm4moe,
// qwen35, qwen35moe), from the parsed config and the Hugging Face one (`cfg`).
void write_decoder_metadata(const ModelConfig& c, const nlohmann::json& cfg, const std::string& arch, int n_mtp,
                            GgufWriter& w) {
  const bool qwen35 = is_qwen35_family(arch);
  w.set_u32(arch + ".block_count", static_cast<uint32_t>(c.num_layers + n_mtp));
  w.set_u32(arch + ".context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.set_u32(arch + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
  int first_routed = -1, routed_layers = 0;
  for (int i = 0; i < c.num_layers; ++i)
    if (c.layers[size_t(i)].mlp.routed()) routed_layers++, first_routed = first_routed < 0 ? i : first_routed;
  // A model with no dense MLP anywhere has no feed_forward_length unless its config
  // names one (as llama.cpp's converter writes it).
  if (routed_layers < c.num_layers || cfg.contains("intermediate_size"))
    w.set_u32(arch + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.set_u32(arch + ".attention.head_count", static_cast<uint32_t>(c.num_heads));
  w.set_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w.set_u32(arch + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.set_u32(arch + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.set_f32(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  if (c.rope_scaling.type == "linear") {
    w.set_string(arch + ".rope.scaling.type", "linear");
    w.set_f32(arch + ".rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  } else if (!c.rope_scaling.type.empty()) {
    fail(ErrorKind::kUnsupported, "quantize: rope_scaling '{}' has no GGUF form in nextn yet", c.rope_scaling.type);
  }
  if (n_mtp > 0) w.set_u32(arch + ".nextn_predict_layers", static_cast<uint32_t>(n_mtp));
  if (first_routed >= 0) {
    const MlpSpec& moe = c.layers[size_t(first_routed)].mlp;
    w.set_u32(arch + ".expert_count", static_cast<uint32_t>(moe.experts));
    w.set_u32(arch + ".expert_used_count", static_cast<uint32_t>(moe.top_k));
    w.set_u32(arch + ".expert_feed_forward_length", static_cast<uint32_t>(moe.expert_intermediate));
  }
  if (arch == "qwen35moe") {
    // llama.cpp's qwen35moe: softmax over all experts, top-k renormalised, a shared
    // expert of its own width times sigmoid(ffn_gate_inp_shexp · x), in every layer.
    if (routed_layers < c.num_layers)
      fail(ErrorKind::kUnsupported, "quantize: qwen35moe GGUF has no dense layers (mlp_only_layers / decoder_sparse_step)");
    const MlpSpec& moe = c.layers[size_t(first_routed)].mlp;
    if (moe.scoring != RouterScoring::kSoftmax || !moe.renormalize || moe.routed_scale != 1.0f || moe.per_expert_scale ||
        moe.correction_bias || moe.shared_intermediate <= 0 || !moe.shared_gate)
      fail(ErrorKind::kUnsupported, "quantize: qwen35moe GGUF needs a renormalised softmax router and a gated shared "
           "expert (norm_topk_prob = true, shared_expert_intermediate_size > 0)");
    w.set_u32(arch + ".expert_shared_feed_forward_length", static_cast<uint32_t>(moe.shared_intermediate));
    w.set_u32(arch + ".expert_gating_func", 1);  // softmax
    w.set_bool(arch + ".expert_weights_norm", true);
  } else if (first_routed >= 0) {
    const MlpSpec& moe = c.layers[size_t(first_routed)].mlp;
    if (moe.scoring != RouterScoring::kSigmoid || moe.shared_gate || moe.per_expert_scale)
      fail(ErrorKind::kUnsupported, "quantize: this router has no GGUF form in nextn yet ({})", c.architecture);
    w.set_u32(arch + ".expert_shared_count", static_cast<uint32_t>(moe.shared_intermediate / moe.expert_intermediate));
    w.set_u32(arch + ".leading_dense_block_count", static_cast<uint32_t>(first_routed));
    w.set_f32(arch + ".expert_weights_scale", moe.routed_scale);
    w.set_bool(arch + ".expert_weights_norm", moe.renormalize);
    w.set_u32(arch + ".expert_gating_func", 2);  // sigmoid
    w.set_u32(arch + ".rope.dimension_count", static_cast<uint32_t>(c.layers[0].attention.rotary_dim));
  }
  if (qwen35) {
    const LayerSpec* dn = nullptr;
    const LayerSpec* attention = nullptr;
    for (const LayerSpec& l : c.layers) (l.mixer == MixerKind::kGatedDeltaNet ? dn : attention) = &l;
    if (!dn || !attention) fail(ErrorKind::kUnsupported, "quantize: a Qwen3.5 model needs both layer kinds for GGUF");
    const DeltaNetSpec& d = dn->delta_net;
    w.set_u32(arch + ".ssm.conv_kernel", uint32_t(d.conv_kernel));
    w.set_u32(arch + ".ssm.state_size", uint32_t(d.key_dim));
    w.set_u32(arch + ".ssm.group_count", uint32_t(d.key_heads));
    w.set_u32(arch + ".ssm.time_step_rank", uint32_t(d.value_heads));
    w.set_u32(arch + ".ssm.inner_size", uint32_t(d.value_heads * d.value_dim));
    w.set_u32(arch + ".full_attention_interval", uint32_t(full_attention_interval(c)));
    w.set_u32(arch + ".rope.dimension_count", uint32_t(attention->attention.rotary_dim));
    // mRoPE sections (text-only input uses one position on every axis); llama.cpp
    // requires the key and writes its default when the config has none.
    std::vector<int32_t> sections = {11, 11, 10, 0};
    for (const char* key : {"rope_parameters", "rope_scaling"})
      if (cfg.contains(key) && cfg[key].is_object() && cfg[key].contains("mrope_section") &&
          cfg[key]["mrope_section"].is_array()) {
        sections.assign(4, 0);
        for (size_t i = 0; i < 4 && i < cfg[key]["mrope_section"].size(); ++i)
          sections[i] = cfg[key]["mrope_section"][i].get<int32_t>();
      }
    w.set_i32s(arch + ".rope.dimension_sections", sections);
  }
}

int run_quantize(const QuantizeFlags& f) {
  DType base;
  if (f.type == "q8_0") base = DType::kQ8_0;
  else if (f.type == "q4_0") base = DType::kQ4_0;
  else if (f.type == "q4_k_m") base = DType::kQ4_K;
  else if (f.type == "q6_k") base = DType::kQ6_K;
  else fail(ErrorKind::kBadInput, "--type '{}' is not one of q8_0, q4_0, q4_k_m, q6_k", f.type);
  auto ckpt = Checkpoint::open(f.src);
  if (ckpt->gguf_metadata()) fail(ErrorKind::kBadInput, "{}: already a GGUF file; quantize a safetensors checkpoint", f.src);
  if (ckpt->config().contains("quantization"))
    fail(ErrorKind::kBadInput,
         "{}: already MLX-quantized; quantize the F32/F16/BF16 checkpoint it came from (rounding twice loses more)",
         f.src);
  const ModelConfig c = parse_model_config(*ckpt);
  const GgufDialect* dialect = gguf_dialect_writing(c.architecture);
  const std::string arch = dialect ? dialect->arch() : gguf_arch(c);
  const bool qwen35 = is_qwen35_family(arch);
  const int n_mtp = c.mtp_layout == MtpLayout::kNone ? 0 : c.num_mtp_layers;

  // The matrix type of `gguf_name` with `cols` columns in this recipe.
  auto matrix_type = [&](const std::string& gguf_name, int64_t cols) {
    const bool output = gguf_name == "output.weight" || gguf_name.ends_with(".nextn.shared_head_head.weight") ||
                        (gguf_name == "token_embd.weight" && c.tie_word_embeddings);
    DType t_type = base;
    int layer = -1;
    if (gguf_name.compare(0, 4, "blk.") == 0) layer = std::stoi(gguf_name.substr(4));
    if (output && base != DType::kQ8_0) t_type = DType::kQ6_K;
    if (base == DType::kQ4_K && layer >= 0 && layer < c.num_layers &&
        (gguf_name.ends_with(".attn_v.weight") || gguf_name.ends_with(".ffn_down.weight") ||
         gguf_name.ends_with(".ffn_down_exps.weight")) &&
        use_more_bits(layer, c.num_layers))
      t_type = DType::kQ6_K;
    return fallback(t_type, cols);
  };

  static const std::regex expert_name(R"((model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight)");
  std::map<std::string, std::map<int, std::string>> stacks;  // "…experts.gate_proj" → expert → source name
  std::vector<Planned> plan;
  for (const std::string& name : ckpt->tensor_names()) {
    // A vision-language checkpoint's towers go to a projector file of their own in
    // llama.cpp's layout (mmproj-*.gguf), never into the text GGUF.
    if (name.starts_with("model.visual.") || name.starts_with("model.vision_tower.") ||
        name.starts_with("model.embed_vision.") || name.starts_with("model.audio_tower.") ||
        name.starts_with("model.embed_audio."))
      continue;
    Planned p;
    p.src_name = name;
    const std::string hf = dialect  ? name
                           : qwen35 ? qwen35_layer_name(name, c.num_layers)
                                    : deepseek_mtp_name(name, c.num_layers, p.swap_halves);
    std::smatch m;
    if (std::regex_match(hf, m, expert_name)) {
      stacks[m[1].str() + "." + m[3].str()][std::stoi(m[2].str())] = name;
      continue;
    }
    if (hf.ends_with(".mlp.experts.gate_up_proj") || hf.ends_with(".mlp.experts.down_proj")) {
      // Experts already stacked [E, R, C]: one expert at a time; gate_up split in two.
      const TensorView* t = ckpt->find(name);
      if (!t || t->shape.size() != 3) fail(ErrorKind::kBadInput, "{}: tensor '{}' is not a 3-D float tensor", f.src, name);
      const int64_t E = t->shape[0], R = t->shape[1], C = t->shape[2];
      const std::string stem = hf.substr(0, hf.rfind('.'));
      const bool fused = hf.ends_with(".gate_up_proj");
      if (fused && R % 2 != 0) fail(ErrorKind::kBadInput, "{}: tensor '{}' has an odd row count {}", f.src, name, R);
      const int64_t rows = fused ? R / 2 : R;
      for (int half = 0; half < (fused ? 2 : 1); ++half) {
        Planned s = p;
        s.gguf_name = gguf_name_from_hf(stem + (fused ? (half == 0 ? ".gate_proj" : ".up_proj") : ".down_proj"), arch);
        for (int64_t e = 0; e < E; ++e) s.parts.push_back({name, e, half * rows, rows});
        s.shape = {E, rows, C};
        s.dtype = matrix_type(s.gguf_name, C);
        plan.push_back(s);
      }
      continue;
    }
    p.gguf_name = dialect ? dialect->gguf_name(hf) : gguf_name_from_hf(hf, arch);
    if (p.gguf_name.empty()) {
      std::fprintf(stderr, "nextn: warning: %s: tensor '%s' has no GGUF name; skipped\n", f.src.c_str(), name.c_str());
      continue;
    }
    const TensorView* t = ckpt->find(name);
    if (!t) fail(ErrorKind::kBadInput, "{}: tensor '{}' is not a float tensor", f.src, name);
    p.permute_heads = 0;
    if (arch == "llama" && t->shape.size() == 2) {
      if (p.gguf_name.ends_with(".attn_q.weight")) p.permute_heads = c.num_heads;
      if (p.gguf_name.ends_with(".attn_k.weight")) p.permute_heads = c.num_kv_heads;
    }
    p.shape = t->shape;
    // Routers stay F32, as llama.cpp keeps ffn_gate_inp (and the converter the shared
    // expert's gate ffn_gate_inp_shexp): rounding them moves experts' ranks and gates.
    const bool router = p.gguf_name.ends_with(".ffn_gate_inp.weight") || p.gguf_name.ends_with(".ffn_gate_inp_shexp.weight");
    // Experts stacked [E, R, C] (ffn_*_exps) are quantized like matrices of C columns.
    const bool stacked = t->shape.size() == 3 && p.gguf_name.ends_with("_exps.weight");
    p.dtype = router || (t->shape.size() != 2 && !stacked) ? DType::kF32 : matrix_type(p.gguf_name, t->shape.back());
    if (qwen35) plan_qwen35(c, p);  // (the 3-D conv stays F32, as llama.cpp keeps it)
    plan.push_back(p);
  }
  for (const auto& [stacked, experts] : stacks) {
    Planned p;
    p.swap_halves = false;
    p.permute_heads = 0;
    p.gguf_name = gguf_name_from_hf(stacked, arch);
    int e = 0;
    for (const auto& [index, name] : experts) {
      if (index != e++) fail(ErrorKind::kBadInput, "{}: {} has no expert {}", f.src, stacked, e - 1);
      p.parts.push_back({name});
    }
    const TensorView* first = ckpt->find(p.parts[0].name);
    if (!first || first->shape.size() != 2)
      fail(ErrorKind::kBadInput, "{}: tensor '{}' is not a float matrix", f.src, p.parts[0].name);
    for (const Planned::Part& part : p.parts) {
      const TensorView* t = ckpt->find(part.name);
      if (!t || t->shape != first->shape)
        fail(ErrorKind::kBadInput, "{}: expert tensor '{}' differs in shape from '{}'", f.src, part.name, p.parts[0].name);
    }
    p.src_name = p.parts[0].name;
    p.shape = {int64_t(p.parts.size()), first->shape[0], first->shape[1]};
    p.dtype = matrix_type(p.gguf_name, first->shape[1]);
    plan.push_back(p);
  }

  if (f.no_mtp || f.mtp_only) {
    if (n_mtp == 0) fail(ErrorKind::kBadInput, "{}: --no-mtp / --mtp-only: the checkpoint has no MTP layers", f.src);
    auto mtp_block = [&](const std::string& g) { return g.compare(0, 4, "blk.") == 0 && std::stoi(g.substr(4)) >= c.num_layers; };
    std::erase_if(plan, [&](const Planned& p) {
      if (f.no_mtp) return mtp_block(p.gguf_name);
      return !mtp_block(p.gguf_name) && p.gguf_name != "token_embd.weight" && p.gguf_name != "output_norm.weight" &&
             p.gguf_name != "output.weight";
    });
  }

  GgufWriter w;
  w.set_string("general.architecture", arch);
  w.set_string("general.name", std::filesystem::path(f.src).filename().string());
  const uint32_t file_type = base == DType::kQ8_0 ? 7 : base == DType::kQ4_0 ? 2 : base == DType::kQ4_K ? 15 : 18;
  w.set_u32("general.file_type", file_type);
  w.set_u32("general.quantization_version", 2);
  const nlohmann::json& cfg = ckpt->config().contains("text_config") ? ckpt->config()["text_config"] : ckpt->config();
  if (dialect) {
    dialect->write_metadata(cfg, w);
    for (GgufGeneratedTensor& g : dialect->generated(cfg)) {
      Planned p;
      p.gguf_name = g.name;
      p.shape = g.shape;
      p.dtype = DType::kF32;
      p.generated = std::move(g.values);
      plan.push_back(std::move(p));
    }
  } else {
    write_decoder_metadata(c, cfg, arch, f.no_mtp ? 0 : n_mtp, w);
  }
  write_tokenizer_metadata(f.src, c, dialect ? dialect->spm_vocabulary() : "llama", w);

  for (const Planned& p : plan) w.add_tensor(p.gguf_name, p.shape, p.dtype);
  w.begin(f.out);
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    if (f.progress) print_progress(i, plan.size(), p.gguf_name, p.dtype);
    if (!p.generated.empty()) {
      w.write_data(i, p.generated.data(), p.generated.size() * sizeof(float));
      continue;
    }
    std::vector<uint8_t> bytes(w.tensor_bytes(i));
    // Stacked experts are converted one expert at a time (each a whole number of rows).
    const std::vector<Planned::Part> parts = p.parts.empty() ? std::vector<Planned::Part>{{p.src_name}} : p.parts;
    const size_t part_bytes = bytes.size() / parts.size();
    for (size_t k = 0; k < parts.size(); ++k) {
      const TensorView& t = *ckpt->find(parts[k].name);
      const std::vector<float> x =
          source_floats(parts[k].expert < 0 ? t : expert_rows(t, parts[k].expert, parts[k].row0, parts[k].rows), p);
      uint8_t* out = bytes.data() + k * part_bytes;
      if (p.dtype == DType::kF32) {
        std::memcpy(out, x.data(), part_bytes);
      } else if (p.dtype == DType::kF16) {
        for (size_t j = 0; j < x.size(); ++j) {
          const uint16_t h = f32_to_f16(x[j]);
          std::memcpy(out + 2 * j, &h, 2);
        }
      } else {
        weight_format(p.dtype)->quantize(x.data(), static_cast<int64_t>(x.size()), out);
      }
    }
    w.write_data(i, bytes.data(), bytes.size());
  }
  if (f.progress) print_progress(plan.size(), plan.size(), "done", base);
  w.finish();
  std::fprintf(stderr, "wrote %s (%zu tensors, %s)\n", f.out.c_str(), plan.size(), f.type.c_str());
  return 0;
}

}  // namespace

Command add_quantize_command(CLI::App& root) {
  auto f = std::make_shared<QuantizeFlags>();
  CLI::App* app = root.add_subcommand("quantize", "Write a BF16/F16/F32 checkpoint as a quantized GGUF file");
  app->add_option("src", f->src, "Source checkpoint directory (safetensors)")->required();
  app->add_option("--type", f->type, "q8_0, q4_0, q4_k_m or q6_k")->capture_default_str();
  app->add_option("--out", f->out, "Output .gguf file")->required();
  app->add_flag("!--no-progress", f->progress, "No progress bar");
  app->add_flag("--no-mtp", f->no_mtp, "Leave the MTP layers out (llama.cpp's trunk file of the split form)");
  app->add_flag("--mtp-only", f->mtp_only,
                "Only the MTP layers, with the embedding, final norm and output head (llama.cpp's mtp- file; "
                "load it with --mtp-assistant-model beside the --no-mtp file)")
      ->excludes("--no-mtp");
  return {app, [f]() { return run_quantize(*f); }};
}

}  // namespace nextn
