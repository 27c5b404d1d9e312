// vision/gemma4_vision.h — the Gemma 4 vision tower (a SigLIP-like ViT with Gemma's
// sandwich RMSNorms) and its pooler / projector, from a Hugging Face checkpoint's
// model.vision_tower.* and model.embed_vision.* tensors: patch rows
// (gemma4_processor.h) in, one row per k × k pooled patch block out, of the language
// model's width. Weights stay in their stored dtype and go through the engine's matmul.
//
//   h = input_proj(2·(x − 0.5)) + TBL[0][x_pos] + TBL[1][y_pos]          no bias
//   ×depth: u = RMS(h; ln1); q, k = RMS_head(q(u); q_norm), RMS_head(k(u); k_norm),
//           v = RMS_head(v(u)) without weight; q, k = RoPE2D; o = softmax(q kᵀ) v (scale 1)
//           h += RMS(o_proj(o); post_attention_norm)
//           h += RMS(down(gelu_tanh(gate(u')) ⊙ up(u')); post_ffn_norm), u' = RMS(h; pre_ffn_norm)
//   s = avg over each k × k block of patches · √D   (raster order over the pooled grid)
//   standardize models: s = (s − std_bias) ⊙ std_scale
//   out = RMS(s) without weight · embedding_projectionᵀ                  [tokens, text hidden]
// RMS(v; w) = v / √(mean(v²) + eps) · w — plain w, no +1. No final norm after the last
// layer. Clipped linears (E2B/E4B): every attention / MLP Linear clamps its input to
// [input_min, input_max] and its output to [output_min, output_max] (scalars stored
// beside the weight). 2-D RoPE (θ = 100): the head's first half rotates with x (the
// patch column), the second half with y (the row); inside each half the NeoX pairs
// (j, j + d/4) with frequencies θ^(−2j/(d/2)). Attention is bidirectional over the
// patches of one image.
#pragma once
#include <nlohmann/json.hpp>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "vision/encoder.h"
#include "vision/gemma4_processor.h"

namespace nextn {
class Checkpoint;
}

namespace nextn::vision {

struct Gemma4VisionConfig {
  int depth = 16;
  int hidden = 768;  // D
  int heads = 12;
  int head_dim = 64;  // d
  int intermediate = 3072;
  int patch_size = 16;
  int pooling_kernel_size = 3;
  int position_embedding_size = 10240;  // rows of each of the two position tables
  int out_hidden = 0;                   // the language model's hidden size (text_config.hidden_size)
  double rope_theta = 100.0;
  float eps = 1e-6f;
  bool standardize = false;

  // From config.json's "vision_config" and the text model's hidden size; kBadInput naming
  // the key when a value is invalid, kUnsupported for a kind of tower nextn does not run.
  static Gemma4VisionConfig from_json(const nlohmann::json& vision_config, int text_hidden);
};

class Gemma4VisionTower {
 public:
  // `prefix`: where the model's tensors live ("model." in Hugging Face checkpoints: the
  // tower under vision_tower., the projector under embed_vision.).
  static std::unique_ptr<Gemma4VisionTower> load(const Checkpoint& checkpoint, const std::string& prefix = "model.");

  const Gemma4VisionConfig& config() const { return config_; }
  // [tokens_h · tokens_w, out_hidden] row-major.
  std::vector<float> forward(const ProcessedImage& patches) const;

 private:
  // A Linear without bias and its clamps (±inf where the checkpoint stores none).
  struct Linear {
    WeightMatrix w;
    float in_min = -std::numeric_limits<float>::infinity(), in_max = std::numeric_limits<float>::infinity();
    float out_min = -std::numeric_limits<float>::infinity(), out_max = std::numeric_limits<float>::infinity();
    bool clips_input() const;
    bool clips_output() const;
  };
  struct Layer {
    std::vector<float> input_norm;      // input_layernorm [D]
    Linear q, k, v;                     // [heads·d, D]
    Linear o;                           // [D, heads·d]
    std::vector<float> q_norm, k_norm;  // [d]
    std::vector<float> post_attention_norm;   // [D]
    std::vector<float> pre_feedforward_norm;  // [D]
    std::vector<float> post_feedforward_norm; // [D]
    Linear gate, up;                    // [I, D]
    Linear down;                        // [D, I]
  };

  // y = clamp(W · clamp(x)) for n rows of x.
  void apply(const Linear& l, const float* x, int64_t n, float* y) const;

  Gemma4VisionConfig config_;
  WeightMatrix input_proj_;             // patch_embedder.input_proj [D, 3·p²]
  // patch_embedder.position_embedding_table [2, position_embedding_size, D] as
  // [2·position_embedding_size, D] rows: the x table, then the y table (stored dtype; rows
  // read as float when used: 2 × 10240 × 1152 values in the large towers)
  WeightMatrix position_table_;
  std::vector<Layer> layers_;
  std::vector<float> std_bias_, std_scale_;  // [D], standardize models only
  WeightMatrix projection_;             // embed_vision.embedding_projection [out_hidden, D]
};

// The "gemma4" VisionEncoder over `weights`' model.vision_tower.* tower: its processor's
// budget from the checkpoint's processor config (processor_config.json's
// "image_processor".max_soft_tokens, or preprocessor_config.json's max_soft_tokens), else
// 280; EncoderOptions.max_tokens overrides it. The placeholder is the language model's
// <|image|> between <|image> and <image|>, which the server writes (Gemma 4's chat
// template writes <|image|> alone).
std::unique_ptr<VisionEncoder> load_gemma4_encoder(std::unique_ptr<Checkpoint> weights,
                                                   const ImagePlaceholder& lm_tokens, const EncoderOptions& options);

}  // namespace nextn::vision
