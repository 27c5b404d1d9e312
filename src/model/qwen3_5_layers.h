// model/qwen3_5_layers.h — the two decoder layers of Qwen3.5 / Qwen3.6 (and the
// layer of its MTP head): gated full attention and Gated DeltaNet. Both use the
// (1 + w) RMSNorm of the checkpoint (config.norm_offset) except the DeltaNet output norm.
#pragma once
#include <memory>
#include <string>

#include "model/block.h"
#include "model/config.h"
#include "model/weights.h"

namespace nextn {

// `prefix`{input_layernorm, self_attn.{q_proj (query|gate per head), k_proj, v_proj, o_proj,
// q_norm, k_norm}, post_attention_layernorm, mlp.*}
std::unique_ptr<Block> make_gated_attention_block(const ModelConfig& config, const LayerSpec& layer,
                                                  WeightStore& store, const std::string& prefix);

// `prefix`{input_layernorm, linear_attn.{in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d,
// dt_bias, A_log, norm, out_proj}, post_attention_layernorm, mlp.*}
std::unique_ptr<Block> make_gated_delta_net_block(const ModelConfig& config, const LayerSpec& layer,
                                                  WeightStore& store, const std::string& prefix);

// Chunk length of the parallel (chunked) delta-rule form used for prefill.
constexpr int kDeltaNetChunk = 64;

}  // namespace nextn
