// model/gemma4_layers.h — the Gemma 4 decoder layer (gemma4_layer.cc), shared by the
// target model (gemma4.cc) and the assistant drafter's query-only layers
// (gemma4_assistant.cc).
#pragma once
#include <memory>
#include <string>

#include "model/block.h"
#include "model/config.h"
#include "model/weights.h"

namespace nextn {

struct Gemma4BlockOptions {
  int hidden = 0;           // residual width of the model the layer belongs to
  float eps = 1e-6f;
  int per_layer_input = 0;  // P > 0: the layer adds its per-layer embedding (BlockRows::layer_inputs)
  bool query_only = false;  // no k/v projections: attends over KV another layer (or the target) wrote
  RoutedNames routed_names;  // 26B-A4B (LayerSpec::mlp routed): router.proj, router.per_expert_scale, experts
};

// Binds `prefix`{input_layernorm, self_attn.*, post_attention_layernorm,
// pre_feedforward_layernorm, mlp.*, post_feedforward_layernorm, layer_scalar,
// per_layer_*}. forward(layer, ...) attends over `layer`'s slot in each segment's
// state; segments marked read_only (and query-only layers) never append.
std::unique_ptr<Block> make_gemma4_layer(const LayerSpec& layer, const Gemma4BlockOptions& options, WeightStore& store,
                                         const std::string& prefix);

}  // namespace nextn
