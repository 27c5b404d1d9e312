// vision/qwen_processor.h — the Qwen3.5 / Qwen3.6 image processor: a decoded RGB image
// turned into the `pixel_values` rows and the (t, h, w) grid the Qwen3-VL-style vision
// tower reads, as Hugging Face's Qwen2VLImageProcessor (the class the checkpoints'
// preprocessor_config.json names) produces them:
//   1. smart_resize: both sides to multiples of patch × merge (32), the pixel count
//      brought into [min_pixels, max_pixels], Python's round-half-to-even;
//   2. a bicubic resize with PIL's rules (vision/resize.h);
//   3. x/255, then (x − mean)/std per channel (mean = std = 0.5 in every Qwen3.5 config);
//   4. patches of patch_size², the still image repeated temporal_patch_size (2) times,
//      rows in merge-window order and each row in (channel, t, y, x) order.
// The vision tower that reads the result is vision/qwen_vision.h (docs/vision-models.md).
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <vector>

#include "vision/encoder.h"
#include "vision/image.h"
#include "vision/resize.h"

namespace nextn::vision {

struct QwenProcessorConfig {
  int patch_size = 16;
  int temporal_patch_size = 2;
  int merge_size = 2;
  // preprocessor_config.json's size.shortest_edge / size.longest_edge, which are pixel
  // counts despite their names (Qwen/Qwen3.5-* ship these two values).
  int64_t min_pixels = 65536;
  int64_t max_pixels = 16777216;
  std::array<double, 3> mean = {0.5, 0.5, 0.5};
  std::array<double, 3> std = {0.5, 0.5, 0.5};
  double rescale_factor = 1.0 / 255.0;

  int factor() const { return patch_size * merge_size; }
  // From a preprocessor_config.json (missing keys keep the defaults above, which are the
  // Qwen3.5 checkpoints' values, not the processor class's CLIP defaults).
  static QwenProcessorConfig from_json(const nlohmann::json& config);
};

struct ResizeTarget {
  int height = 0;
  int width = 0;
};

// Qwen2-VL's smart_resize: kBadInput for sides under 10 pixels or an aspect ratio over
// 200, as the reference refuses them.
ResizeTarget smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels);

// Steps 1–4: rows in merge-window order, tokens_h × tokens_w = the merged grid.
ProcessedImage qwen_process(const DecodedImage& image, const QwenProcessorConfig& config);

// Steps 3 and 4 alone, on an image already at a size the patches tile.
ProcessedImage qwen_patchify(const DecodedImage& resized, const QwenProcessorConfig& config);

}  // namespace nextn::vision
