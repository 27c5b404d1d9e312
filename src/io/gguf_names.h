// io/gguf_names.h — llama.cpp's GGUF tensor names ↔ Hugging Face names, for the
// decoder families nextn runs (llama, qwen2, qwen3) and DeepSeek-style MTP ("nextn")
// layers, which GGUF stores as blk.{n_layer + i}.nextn.* next to an ordinary block.
#pragma once
#include <string>

namespace nextn {

// "blk.3.attn_q.weight" → "model.layers.3.self_attn.q_proj.weight"; "" if unknown.
std::string hf_name_from_gguf(const std::string& gguf_name);
// The inverse; "" if the name has no GGUF equivalent.
std::string gguf_name_from_hf(const std::string& hf_name);

}  // namespace nextn
