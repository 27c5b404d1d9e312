// vision/gemma4_processor.h — the Gemma 4 image processor: a decoded RGB image turned
// into the patch rows the Gemma 4 vision tower reads, as Hugging Face's
// Gemma4ImageProcessor produces them:
//   1. a target size that keeps the aspect ratio and FILLS the soft-token budget:
//      max_patches = budget·k², f = √(max_patches·p² / (h·w)), each side ⌊f·side / (k·p)⌋·k·p
//      (multiples of 48 for p = 16, k = 3); a side that comes out 0 becomes k·p and the
//      other ⌊long/short⌋·k·p, at most budget·k·p (gemma4_target_size);
//   2. PIL's bicubic resize to it (vision/resize.h), skipped when the size already fits;
//   3. x/255, no mean/std normalisation (the tower maps to [−1, 1] itself);
//   4. patches of p × p in raster order (row by row), each row (py, px, channel).
// The patch of row r, column c has position (x, y) = (c, r): column first.
//
// Hugging Face pads the rows to max_patches with zeros at position (−1, −1); the tower
// masks those keys, zeroes them before pooling and strips their pooled rows, so the
// real rows' results do not depend on the padding: nextn does not pad.
#pragma once
#include <nlohmann/json.hpp>

#include "vision/encoder.h"
#include "vision/image.h"

namespace nextn::vision {

struct Gemma4ProcessorConfig {
  int patch_size = 16;          // p
  int pooling_kernel_size = 3;  // k: the tower averages k × k patches into one soft token
  int max_soft_tokens = 280;    // the budget (70, 140, 280, 560 or 1120 in Google's processors)

  int side_multiple() const { return patch_size * pooling_kernel_size; }
  // Reads patch_size, pooling_kernel_size and max_soft_tokens from an image processor's
  // settings (processor_config.json's "image_processor" object, or a
  // preprocessor_config.json); missing keys keep the values above.
  static Gemma4ProcessorConfig from_json(const nlohmann::json& image_processor);
};

struct Gemma4Size {
  int height = 0;
  int width = 0;
};

// Step 1. kBadInput when both sides come out 0 (cannot happen for a budget ≥ 1 and a
// picture of ≥ 1 pixel, but the reference refuses it too).
Gemma4Size gemma4_target_size(int height, int width, const Gemma4ProcessorConfig& config);

// Steps 1–4: rows = patches in raster order, cols = 3·p²; grid_h × grid_w patches;
// tokens_h × tokens_w = the pooled grid (grid / k).
ProcessedImage gemma4_process(const DecodedImage& image, const Gemma4ProcessorConfig& config);

// Steps 3 and 4 alone, on an image whose sides are multiples of k·p.
ProcessedImage gemma4_patchify(const DecodedImage& resized, const Gemma4ProcessorConfig& config);

}  // namespace nextn::vision
