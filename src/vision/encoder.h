// vision/encoder.h — what the rest of nextn sees of a vision encoder, whatever the model
// family: a processor (a decoded picture → the tower's input, cheap, run on the request's
// thread by the server) and a tower (that input → one row per image token, of the
// language model's width, run by the engine when the request is admitted), plus how the
// prompt marks an image. Families register in vision/encoders.cc: one file each
// (qwen_vision.cc, ...) and one line there.
//
// The language model's side of images is not here: positions (M-RoPE for Qwen3.5,
// model/mrope.h) and attention rules follow from the language model's config.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vision/image.h"

namespace nextn {
class Checkpoint;
}

namespace nextn::vision {

// One picture as its processor leaves it.
struct ProcessedImage {
  int grid_t = 1, grid_h = 0, grid_w = 0;  // the tower's patch grid; grid_t = 1 for a still image
  int64_t rows = 0;                        // input rows of the tower (patches, in the family's order)
  int64_t cols = 0;                        // values per row
  std::vector<float> values;               // rows × cols
  int tokens_h = 0, tokens_w = 0;          // the language model's grid: one token per cell, row-major
  DecodedImage resized;                    // the picture at the size the patches tile

  int64_t n_tokens() const { return int64_t(tokens_h) * tokens_w; }
};

// How the prompt marks an image. The chat template writes `token` once per image; the
// server expands that one token to `begin` (when ≥ 0), `token` × n_tokens, `end` (when
// ≥ 0). The tower's rows replace the embeddings of the `token` run.
struct ImagePlaceholder {
  int32_t token = -1;
  int32_t begin = -1;
  int32_t end = -1;
};

// Limits a user sets on how many tokens an image may become (llama-server's
// --image-min-tokens / --image-max-tokens); 0 keeps the family's own defaults.
struct EncoderOptions {
  int min_tokens = 0;
  int max_tokens = 0;
};

class VisionEncoder {
 public:
  virtual ~VisionEncoder() = default;
  virtual std::string name() const = 0;  // the family, for logs and `nextn perf`
  virtual ImagePlaceholder placeholder() const = 0;
  virtual int out_hidden() const = 0;  // width of each output row (the language model's hidden size)
  // A decoded picture → the tower's input. kBadInput naming the problem for a picture the
  // family cannot take (too small, too thin). Thread-safe.
  virtual ProcessedImage process(const DecodedImage& image) const = 0;
  // The tower: [n_tokens, out_hidden] row-major.
  virtual std::vector<float> encode(const ProcessedImage& image) const = 0;
  // Multiply-adds × 2 of encode(image)'s matrix products (weights and attention), so
  // `nextn perf` can say what fraction of the machine's matmul rate the tower reaches.
  virtual double matmul_flops(const ProcessedImage& image) const = 0;
};

// The vision encoder in `weights` (a vision-language checkpoint, or llama.cpp's mmproj
// GGUF opened as a checkpoint), which it keeps open: nullptr when `weights` has no tower
// a registered family reads. `lm_tokens`: the language model's image token ids (config.json
// image_token_id and the begin/end-of-image ids; -1 where it has none) — the family
// decides which of them the server writes; without an image token the encoder still
// loads (placeholder().token is -1) and the caller refuses to use it for prompts.
// kBadInput / kUnsupported naming the problem for a tower it recognises but cannot load.
std::unique_ptr<VisionEncoder> load_vision_encoder(std::unique_ptr<Checkpoint> weights, const ImagePlaceholder& lm_tokens,
                                                   const EncoderOptions& options);

// The registered families, for messages.
std::vector<std::string> vision_encoder_families();

}  // namespace nextn::vision
