// io/gguf_names.cc — the name tables (llama.cpp gguf-py constants.py TENSOR_NAMES).
#include "io/gguf_names.h"

#include <cstdlib>
#include <utility>

namespace nextn {
namespace {

enum class Only { kAny, kQwen35, kNotQwen35 };  // which architectures an entry holds for

struct NamePair {
  const char* gguf;  // after "blk.N." (or the whole name for globals)
  const char* hf;    // after "model.layers.N." (or the whole name)
  Only only = Only::kAny;
};

constexpr NamePair kGlobal[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// Where two entries share a name in one architecture, the first holds.
constexpr NamePair kBlock[] = {
    // Qwen3.5 (qwen35, qwen35moe): the norm after attention is llama.cpp's
    // ATTN_POST_NORM, not ffn_norm; the shared expert is singular (mlp.shared_expert)
    // with a sigmoid gate, stored [H] or [1, H] (io/gguf_checkpoint.cc reads both).
    {"post_attention_norm.weight", "post_attention_layernorm.weight", Only::kQwen35},
    {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", Only::kQwen35},
    {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", Only::kQwen35},
    {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", Only::kQwen35},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", Only::kQwen35},
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight", Only::kNotQwen35},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    // Mixture of Experts: router (and its correction bias), the experts stacked
    // [E, rows, cols] per matrix (or gate and up fused [E, 2I, H], as newer llama.cpp
    // converters may write them: the Hugging Face gate_up_proj layout), the shared
    // experts (DeepSeek / GLM naming).
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn_gate_exps.weight", "mlp.experts.gate_proj"},
    {"ffn_up_exps.weight", "mlp.experts.up_proj"},
    {"ffn_gate_up_exps.weight", "mlp.experts.gate_up_proj"},
    {"ffn_down_exps.weight", "mlp.experts.down_proj"},
    {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight", Only::kNotQwen35},
    {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight", Only::kNotQwen35},
    {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight", Only::kNotQwen35},
    // Qwen3.5: gated attention's joint projections and the Gated DeltaNet layers.
    // llama.cpp stores ssm_a as -exp(A_log), the conv squeezed to [channels, K] and the
    // value heads tiled (io/gguf_checkpoint.cc).
    {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight"},
    {"attn_gate.weight", "linear_attn.in_proj_z.weight"},
    {"ssm_beta.weight", "linear_attn.in_proj_b.weight"},
    {"ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
    {"ssm_conv1d.weight", "linear_attn.conv1d.weight"},
    {"ssm_dt.bias", "linear_attn.dt_bias"},
    {"ssm_a", "linear_attn.A_log"},
    {"ssm_norm.weight", "linear_attn.norm.weight"},
    {"ssm_out.weight", "linear_attn.out_proj.weight"},
    // MTP ("nextn") layers: DeepSeek-V3 / GLM-4.5 names.
    {"nextn.eh_proj.weight", "eh_proj.weight"},
    {"nextn.enorm.weight", "enorm.weight"},
    {"nextn.hnorm.weight", "hnorm.weight"},
    {"nextn.shared_head_norm.weight", "shared_head.norm.weight"},
    {"nextn.shared_head_head.weight", "shared_head.head.weight"},
    {"nextn.embed_tokens.weight", "embed_tokens.weight"},
};

bool holds(const NamePair& p, const std::string& arch) {
  if (p.only == Only::kAny) return true;
  return (p.only == Only::kQwen35) == is_qwen35_family(arch);
}

}  // namespace

bool split_layer_name(const std::string& name, const std::string& prefix, std::string& layer, std::string& rest) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return false;
  layer = name.substr(prefix.size(), dot - prefix.size());
  for (char c : layer)
    if (c < '0' || c > '9') return false;
  rest = name.substr(dot + 1);
  return true;
}


bool is_qwen35_family(const std::string& arch) { return arch == "qwen35" || arch == "qwen35moe"; }

std::string hf_name_from_gguf(const std::string& gguf_name, const std::string& arch) {
  for (const NamePair& p : kGlobal)
    if (gguf_name == p.gguf) return p.hf;
  std::string layer, rest;
  if (!split_layer_name(gguf_name, "blk.", layer, rest)) return "";
  for (const NamePair& p : kBlock)
    if (rest == p.gguf && holds(p, arch)) return "model.layers." + layer + "." + p.hf;
  return "";
}

std::string gguf_name_from_hf(const std::string& hf_name, const std::string& arch) {
  for (const NamePair& p : kGlobal)
    if (hf_name == p.hf) return p.gguf;
  std::string layer, rest;
  if (!split_layer_name(hf_name, "model.layers.", layer, rest)) return "";
  for (const NamePair& p : kBlock)
    if (rest == p.hf && holds(p, arch)) return "blk." + layer + "." + p.gguf;
  return "";
}

}  // namespace nextn
