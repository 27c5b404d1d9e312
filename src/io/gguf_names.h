// io/gguf_names.h — llama.cpp's GGUF tensor names ↔ Hugging Face names, for the
// decoder families nextn runs (llama, qwen2, qwen3, glm4moe, qwen35, qwen35moe) and
// DeepSeek-style MTP ("nextn") layers, which GGUF stores as blk.{n_layer + i}.nextn.*
// next to an ordinary block. A few GGUF names mean different Hugging Face tensors in
// different families (Qwen's singular shared expert vs GLM's plural ones, Qwen3.5's
// post_attention_norm): those entries hold for the named architectures only.
#pragma once
#include <string>

namespace nextn {

// "blk.3.attn_q.weight" → "model.layers.3.self_attn.q_proj.weight" in GGUF architecture
// `arch` (general.architecture); "" if unknown.
std::string hf_name_from_gguf(const std::string& gguf_name, const std::string& arch);
// The inverse; "" if the name has no GGUF equivalent in `arch`.
std::string gguf_name_from_hf(const std::string& hf_name, const std::string& arch);
// qwen35 and qwen35moe: the Qwen3.5 hybrid (Gated DeltaNet + gated attention), dense or
// routed, which llama.cpp's converter writes with the same rewrites (1 + w norms,
// ssm_a = -exp(A_log), tiled value heads, the MTP block at blk.{n_layer}).
bool is_qwen35_family(const std::string& arch);
// Splits "<prefix><N>.<rest>" (N decimal digits) into N and rest; false if it is not one.
bool split_layer_name(const std::string& name, const std::string& prefix, std::string& layer, std::string& rest);

}  // namespace nextn
