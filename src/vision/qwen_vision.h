// vision/qwen_vision.h — the Qwen3.5 / Qwen3.6 vision tower (Qwen3-VL's ViT without
// DeepStack), from a Hugging Face checkpoint's model.visual.* tensors: pixel_values
// (qwen_processor.h) in, one row per merged 2×2 patch window out, of the language
// model's width. Weights stay in their stored dtype and go through the engine's matmul,
// as do attention's two products (per head, in blocks of queries); the per-row math
// (LayerNorm, 2-D RoPE, GELU) is in qwen_vision.cc.
//
//   h = patch_embed(x) + interpolated pos_embed          Conv3d as one [D, 3·2·p²] matmul
//   ×depth: h += proj(attn(rope2d(qkv(LN1(h)))));  h += fc2(gelu_tanh(fc1(LN2(h))))
//   out = fc2(gelu_erf(fc1(concat4(LN(h)))))              the patch merger
//
// Attention is bidirectional over the patches of one image. Processor and tower together
// are the "qwen3_5" VisionEncoder (vision/encoder.h, load_qwen_encoder); the engine runs
// the tower at a request's admission and its rows replace the placeholder rows'
// embeddings (model/model.h EmbeddingSpan).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "vision/encoder.h"
#include "vision/qwen_processor.h"

namespace nextn {
class Checkpoint;
}

namespace nextn::vision {

struct QwenVisionConfig {
  int depth = 27;
  int hidden = 1152;  // D
  int heads = 16;
  int intermediate = 4304;
  int patch_size = 16;
  int temporal_patch_size = 2;
  int merge_size = 2;
  int num_position_embeddings = 2304;  // a side × side table
  int out_hidden = 3584;               // the language model's hidden size
  double rope_theta = 10000.0;
  float eps = 1e-6f;

  int head_dim() const { return hidden / heads; }
  int table_side() const;  // √num_position_embeddings
  // From config.json's "vision_config"; kBadInput naming the key when a value is invalid.
  static QwenVisionConfig from_json(const nlohmann::json& vision_config);
};

class QwenVisionTower {
 public:
  // `prefix`: where the tower's tensors live ("model.visual." in Hugging Face checkpoints).
  static std::unique_ptr<QwenVisionTower> load(const Checkpoint& checkpoint, const std::string& prefix = "model.visual.");
  const QwenVisionConfig& config() const { return config_; }

  // One image's pixel_values → [rows / merge², out_hidden] row-major.
  std::vector<float> forward(const ProcessedImage& pixels) const;
  // 2 × the multiply-adds of forward()'s matrix products for `patches` patches.
  double matmul_flops(int64_t patches) const;

 private:
  struct Linear {
    WeightMatrix w;
    std::vector<float> bias;
  };
  struct Norm {
    std::vector<float> weight, bias;
  };
  struct Block {
    Norm norm1, norm2;
    Linear qkv, proj, fc1, fc2;
  };

  QwenVisionConfig config_;
  Linear patch_embed_;
  std::vector<float> pos_embed_;  // [side², D]
  std::vector<Block> blocks_;
  Norm merger_norm_;
  Linear merger_fc1_, merger_fc2_;
};

// The "qwen3_5" VisionEncoder over `weights`' model.visual.* tower: its processor set by
// preprocessor_config.json beside the weights when there is one (else the Qwen3.5
// checkpoints' values), the patch and merge sizes by the tower; the placeholder is the
// language model's <|image_pad|> alone (the chat template writes <|vision_start|> and
// <|vision_end|> around it).
std::unique_ptr<VisionEncoder> load_qwen_encoder(std::unique_ptr<Checkpoint> weights,
                                                 const ImagePlaceholder& lm_tokens, const EncoderOptions& options);

}  // namespace nextn::vision
