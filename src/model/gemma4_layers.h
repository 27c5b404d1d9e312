// model/gemma4_layers.h — the Gemma 4 decoder layer (gemma4_layer.cc), shared by the
// target model (gemma4.cc) and the assistant drafter's query-only layers
// (gemma4_assistant.cc).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "model/block.h"
#include "model/config.h"
#include "model/weights.h"

namespace nextn {

// A layer_types entry in its current name (sliding_attention, full_attention), legacy
// names (local_sliding, local, global) mapped; "" for an unknown name.
std::string gemma4_layer_type(const std::string& name);

// A Gemma 4 text config with newer transformers' per_layer_config form (a layer index ->
// {head_dim, num_key_value_heads} override for the full layers, instead of the flat
// global_head_dim / num_global_key_value_heads) read back into the flat keys; any other
// override is refused naming it. Configs without it come back unchanged.
nlohmann::json gemma4_flat_config(const nlohmann::json& text, const std::string& path);

struct Gemma4BlockOptions {
  int hidden = 0;           // residual width of the model the layer belongs to
  float eps = 1e-6f;
  int per_layer_input = 0;  // P > 0: the layer adds its per-layer embedding (BlockRows::layer_inputs)
  bool query_only = false;  // no k/v projections: attends over KV another layer (or the target) wrote
  RoutedNames routed_names;  // 26B-A4B (LayerSpec::mlp routed): router.proj, router.per_expert_scale, experts
  // A sliding layer of a use_bidirectional_attention "vision" model: the rows of one image
  // (BlockRows::image_end) see each other, within the window's past bound.
  bool image_bidirectional = false;
};

// Binds `prefix`{input_layernorm, self_attn.*, post_attention_layernorm,
// pre_feedforward_layernorm, mlp.*, post_feedforward_layernorm, layer_scalar,
// per_layer_*}. forward(layer, ...) attends over `layer`'s slot in each segment's
// state; segments marked read_only (and query-only layers) never append.
std::unique_ptr<Block> make_gemma4_layer(const LayerSpec& layer, const Gemma4BlockOptions& options, WeightStore& store,
                                         const std::string& prefix);

}  // namespace nextn
