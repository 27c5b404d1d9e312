// vision/encoders.cc — the registry of vision encoder families: each entry says how to
// recognise its tower among a checkpoint's tensors and how to load it. A new family is
// one file (its processor and tower) plus one line here.
#include "io/checkpoint.h"
#include "util/error.h"
#include "vision/encoder.h"
#include "vision/gemma4_vision.h"
#include "vision/qwen_vision.h"

namespace nextn::vision {

namespace {

struct Family {
  const char* name;
  const char* marker;  // a tensor only this family's tower has (Hugging Face name)
  std::unique_ptr<VisionEncoder> (*load)(std::unique_ptr<Checkpoint> weights, const ImagePlaceholder& lm_tokens,
                                         const EncoderOptions& options);
};

constexpr Family kFamilies[] = {
    {"qwen3_5", "model.visual.patch_embed.proj.weight", load_qwen_encoder},
    // The position table, not input_proj: a text-only conversion may keep a stub
    // input_proj, and the encoder-free "unified" Gemma 4 has model.vision_embedder.* only.
    {"gemma4", "model.vision_tower.patch_embedder.position_embedding_table", load_gemma4_encoder},
};

}  // namespace

std::unique_ptr<VisionEncoder> load_vision_encoder(std::unique_ptr<Checkpoint> weights,
                                                   const ImagePlaceholder& lm_tokens, const EncoderOptions& options) {
  if (options.min_tokens < 0 || options.max_tokens < 0 ||
      (options.max_tokens > 0 && options.min_tokens > options.max_tokens))
    fail(ErrorKind::kBadInput, "image token limits: min {} / max {} (need 0 <= min <= max)", options.min_tokens,
         options.max_tokens);
  for (const Family& family : kFamilies)
    if (weights->has(family.marker)) return family.load(std::move(weights), lm_tokens, options);
  return nullptr;
}

std::vector<std::string> vision_encoder_families() {
  std::vector<std::string> names;
  for (const Family& family : kFamilies) names.emplace_back(family.name);
  return names;
}

}  // namespace nextn::vision
