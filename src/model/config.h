// model/config.h — the architecture-independent description of a decoder model,
// parsed from config.json (+ generation_config.json) by the architecture registry.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace nextn {

// Which family's MTP head a model has (a tag; where its tensors are is MtpNames).
enum class MtpLayout {
  kNone,
  kMiMo,      // model.mtp_layers.{i}.{hidden_layernorm,token_layernorm,input_proj,final_layernorm,...}; [h; e]
  kDeepSeek,  // model.layers.{L+i}.{enorm,hnorm,eh_proj,shared_head.*,...}; [e; h]
  kQwen35,    // mtp.{pre_fc_norm_embedding,pre_fc_norm_hidden,fc,layers.{i}.*,norm}; [e; h], (1+w) norms
};

// Where an MTP head keeps the tensors of its layer {i} and how it joins its inputs: data
// each architecture's configure() (or config.cc's detection of the DeepSeek / MiMo
// layouts) fills, so the head (model/mtp_head.cc) has no code per layout. "{i}" in a
// prefix is the layer's tensor index: i, or num_layers + i when `after_trunk`.
struct MtpNames {
  std::string head;          // prefix of the layer's own tensors ("model.mtp_layers.{i}.", "mtp.")
  std::string block;         // prefix of its decoder layer ("model.mtp_layers.{i}.", "mtp.layers.{i}.")
  std::string hidden_norm;   // after `head`: RMSNorm of the incoming hidden state h
  std::string token_norm;    // RMSNorm of the next token's embedding e
  std::string proj;          // the [H, 2H] projection of the joined pair (.weight, optional .bias)
  std::string out_norm;      // the norm after the block (its output is the recycled h)
  std::string shared_head;   // the layer's own output head, used when present ("": the target's)
  bool hidden_first = false;  // the pair is [h; e] (MiMo), else [e; h]
  bool after_trunk = false;   // tensor index num_layers + i (DeepSeek's model.layers.{L+i})
};
// The three layouts nextn knows (docs/architectures.md, "MTP heads").
MtpNames mimo_mtp_names();
MtpNames deepseek_mtp_names();
MtpNames qwen35_mtp_names(const std::string& prefix);  // prefix: "mtp." or where a checkpoint moved it

// What mixes information across positions in one decoder layer.
enum class MixerKind {
  kAttention,         // causal softmax attention over every earlier position
  kSlidingAttention,  // causal attention over the last `window` positions (Gemma 2/3/4)
  kGatedDeltaNet,     // linear attention with a recurrent state (Qwen3.5 / Qwen3-Next)
};

const char* mixer_kind_name(MixerKind kind);  // "full_attention", "sliding_attention", "linear_attention"

// Shape of an attention mixer (softmax attention over a KV cache).
struct AttentionSpec {
  int heads = 0;               // query heads
  int kv_heads = 0;            // key/value heads (GQA: heads % kv_heads == 0)
  int head_dim = 0;            // per head, for q, k and v
  int window = 0;              // kSlidingAttention: keys at i - window < j <= i are visible
  double rope_theta = 10000.0;
  int rotary_dim = 0;          // dims rotated per head (== head_dim, or fewer: partial rotary)
  // > 0: "proportional" RoPE (Gemma 4 full layers): NeoX over the whole head, pairs
  // (i, i + head_dim/2), but only the first rotary_pairs frequencies are non-zero.
  int rotary_pairs = 0;
  bool value_is_key = false;   // Gemma 4 K=V layers: no v_proj, v = the raw key projection
  bool qkv_bias = false;       // Qwen2 / MiMo
  bool qk_norm = false;        // per-head RMSNorm on q and k before RoPE (Qwen3, Qwen3.5, Gemma)
  bool output_gate = false;    // Qwen3.5: q_proj also yields a per-head gate, o = attn * sigmoid(gate)
  int kv_source = -1;          // another layer whose KV this layer reads instead of its own (Gemma 4), -1: own
};

// Shape of a Gated DeltaNet mixer (Qwen3.5 `linear_attn`).
struct DeltaNetSpec {
  int key_heads = 0;    // Hk (q and k heads)
  int value_heads = 0;  // Hv (v, z, a, b heads); value head h reads key head h / (Hv / Hk)
  // llama.cpp's GGUF order: value heads tiled over the key heads, so value head h reads
  // key head h % Hk (Hugging Face groups them: h / (Hv / Hk)).
  bool tiled_value_heads = false;
  int key_dim = 0;      // dk per head
  int value_dim = 0;    // dv per head
  int conv_kernel = 0;  // causal depthwise conv width K over the q|k|v channels
  int conv_channels() const { return 2 * key_heads * key_dim + value_heads * value_dim; }
  // floats of one recurrent state: S [Hv, dk, dv] and the conv window [K - 1, conv channels]
  size_t state_floats() const { return size_t(value_heads) * key_dim * value_dim; }
  size_t conv_floats() const { return size_t(conv_kernel - 1) * conv_channels(); }
  // floats of one logged row (state/recurrent_state.h), what re-applying it takes:
  // k̂ [Hk·dk], v [Hv·dv], β [Hv], α = e^g [Hv], and the pre-conv q|k|v [conv channels]
  size_t record_floats() const {
    return size_t(key_heads) * key_dim + size_t(value_heads) * value_dim + 2 * size_t(value_heads) + conv_channels();
  }
};

// How a routed MLP turns router logits into expert scores.
enum class RouterScoring {
  kSoftmax,  // softmax over all experts (Qwen, Gemma 4)
  kSigmoid,  // sigmoid per expert (GLM-4.5, DeepSeek-V3)
};

// The MLP of one decoder layer, as data. Dense (experts == 0): a gated MLP of width
// LayerSpec::intermediate. Routed (Mixture of Experts): a router picks top_k of
// `experts` per row, y = Σ w_e · expert_e(x) (+ shared expert) (+ a dense MLP beside
// them); model/routed_mlp.cc runs it, rows grouped by expert.
struct MlpSpec {
  int experts = 0;                // routed experts E; 0: dense
  int top_k = 0;                  // experts chosen per row
  int expert_intermediate = 0;    // width of each routed expert
  RouterScoring scoring = RouterScoring::kSoftmax;
  bool renormalize = true;        // the chosen scores divided by their sum (norm_topk_prob)
  float routed_scale = 1.0f;      // the weights times this (GLM routed_scaling_factor)
  bool correction_bias = false;   // GLM: router e_score_correction_bias, added for the choice only
  bool per_expert_scale = false;  // Gemma 4: weight of expert e times router.per_expert_scale[e]
  int shared_intermediate = 0;    // width of the always-on shared expert, 0: none
  bool shared_gate = false;       // Qwen: shared expert output times sigmoid(shared_expert_gate · x)
  bool gelu = false;              // GeGLU (gelu_tanh) instead of SwiGLU (Gemma 4)
  bool routed() const { return experts > 0; }
};

// Where a family keeps its routed tensors, relative to the layer prefix.
struct RoutedNames {
  std::string router = "mlp.gate";            // .weight [E, H]; GLM: .e_score_correction_bias [E]
  std::string per_expert_scale;               // Gemma 4: "router.per_expert_scale" [E]
  // Fused: .gate_up_proj [E, 2I, H] (rows [0, I) gate, [I, 2I) up) and .down_proj [E, H, I];
  // or one tensor per expert: .{e}.gate_proj.weight [I, H], .{e}.up_proj.weight, .{e}.down_proj.weight [H, I].
  std::string experts = "mlp.experts";
  std::string shared = "mlp.shared_expert";   // .{gate,up,down}_proj.weight (width shared_intermediate)
  std::string shared_gate = "mlp.shared_expert_gate";  // .weight [1, H]
};

// One decoder layer, as data: which mixer, its shape, and the MLP.
struct LayerSpec {
  MixerKind mixer = MixerKind::kAttention;
  AttentionSpec attention;  // kAttention / kSlidingAttention
  DeltaNetSpec delta_net;   // kGatedDeltaNet
  int intermediate = 0;     // width of the dense MLP of this layer (unused when routed alone)
  MlpSpec mlp;              // dense or routed
};

struct RopeScaling {
  std::string type;  // "" (none), "llama3", "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture;  // e.g. "Qwen3ForCausalLM"
  std::string model_type;    // e.g. "qwen3"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int max_position_embeddings = 4096;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2 / MiMo
  bool qk_norm = false;   // Qwen3
  MtpLayout mtp_layout = MtpLayout::kNone;
  int num_mtp_layers = 0;
  MtpNames mtp_names;                // where the head's tensors are (mtp_layout != kNone)
  // Why a head the config names cannot be used (--mtp then fails with it); "" otherwise.
  std::string mtp_unavailable;
  // Per-layer specification (size num_layers). Filled from the flat fields above
  // for uniform architectures; hybrid ones (Qwen3.5) set it in their configure().
  std::vector<LayerSpec> layers;
  RoutedNames routed_names;              // routed layers: where their tensors are
  std::string weight_prefix = "model.";  // tensors of the trunk: model.layers.{i}.*, model.norm, ...
  float norm_offset = 0.0f;              // RMSNorm scale is (offset + w): 1 for Qwen3.5's (1+w) norms
  float embedding_scale = 1.0f;          // the embedded rows are multiplied by this (Gemma: sqrt(hidden))
  // M-RoPE (Qwen3.5 mrope_section): the axis (0 t, 1 h, 2 w) each of the rotary_dim / 2
  // frequency slots of the attention layers takes its position from when a forward call
  // brings 3-axis positions (SequenceRows::positions); empty: 1-D RoPE only.
  std::vector<int8_t> mrope_axes;
  // Token ids of the image prompt (config.json image_token_id, vision_start_token_id,
  // vision_end_token_id; Gemma 4: image_token_id, boi_token_id, eoi_token_id); -1 when absent.
  int image_token_id = -1;
  int vision_start_token_id = -1;
  int vision_end_token_id = -1;
  // Gemma 4 use_bidirectional_attention "vision" (26B-A4B, 31B): in sliding-window layers
  // the rows of one image (one SequenceRows::embeddings span) also see each other's later
  // rows; full layers stay causal. Such an image must reach the model in one forward
  // call: the engine never splits one across prefill chunks.
  bool image_bidirectional = false;
  // The token id whose per-layer embedding image rows take (Gemma 4 E-models: config.json
  // pad_token_id, 0).
  int pad_token_id = 0;
  float final_logit_softcap = 0.0f;      // > 0: logits = cap * tanh(logits / cap) (Gemma)
  int per_layer_input_size = 0;          // Gemma 4 E-models: per-layer embedding width P (0: none)
  int per_layer_input_vocab = 0;         // rows of embed_tokens_per_layer
  std::vector<int> eos_token_ids;  // from generation_config.json, else config.json
  int bos_token_id = -1;
};

}  // namespace nextn
