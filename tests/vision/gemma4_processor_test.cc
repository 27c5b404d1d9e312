// tests/vision/gemma4_processor_test.cc — the Gemma 4 processor's fixed points, checked
// without numpy: docs/vision-models.md's target sizes (the budget filled, the zero-side branch),
// the settings read from a processor config, and the raster (py, px, channel) patch
// order on a patch-index image (the numeric comparison with the reference is
// tests/model/test_gemma4_vision.py).
#include "vision/gemma4_processor.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace nextn::vision {
namespace {

TEST(Gemma4Processor, TargetSizesFillTheBudget) {
  struct Case {
    int h, w, budget, want_h, want_w;
  } cases[] = {{750, 1000, 280, 672, 912},  {100, 100, 280, 768, 768},   {512, 512, 280, 768, 768},
               {1080, 1920, 280, 576, 1056}, {750, 1000, 1120, 1344, 1824}, {10, 200, 16, 48, 768},
               {200, 10, 16, 768, 48},      {2, 700, 280, 48, 13440},   {96, 144, 6, 96, 144}};
  for (const Case& c : cases) {
    Gemma4ProcessorConfig config;
    config.max_soft_tokens = c.budget;
    const Gemma4Size t = gemma4_target_size(c.h, c.w, config);
    EXPECT_EQ(t.height, c.want_h) << c.h << "x" << c.w << " budget " << c.budget;
    EXPECT_EQ(t.width, c.want_w) << c.h << "x" << c.w << " budget " << c.budget;
  }
  EXPECT_THROW(gemma4_target_size(0, 10, Gemma4ProcessorConfig{}), Error);
}

TEST(Gemma4Processor, ConfigKeys) {
  const auto c = Gemma4ProcessorConfig::from_json(
      nlohmann::json{{"max_soft_tokens", 70}, {"patch_size", 16}, {"pooling_kernel_size", 3}, {"do_normalize", false}});
  EXPECT_EQ(c.max_soft_tokens, 70);
  EXPECT_EQ(c.side_multiple(), 48);
  EXPECT_EQ(Gemma4ProcessorConfig::from_json(nlohmann::json::object()).max_soft_tokens, 280);
  EXPECT_THROW(Gemma4ProcessorConfig::from_json(nlohmann::json{{"max_soft_tokens", 0}}), Error);
  EXPECT_THROW(Gemma4ProcessorConfig::from_json(nlohmann::json{{"max_soft_tokens", "many"}}), Error);
}

TEST(Gemma4Processor, PatchesRunInRasterOrderChannelLast) {
  // A 96×144 image (6×9 patches) whose patch at (r, c) holds 20·(r·9 + c) / 4 + channel
  // at every pixel but one: pixel (py, px) = (3, 5) of each patch adds 1.
  DecodedImage img{144, 96, std::vector<uint8_t>(144 * 96 * 3)};
  for (int y = 0; y < 96; ++y)
    for (int x = 0; x < 144; ++x)
      for (int ch = 0; ch < 3; ++ch)
        img.rgb[(size_t(y) * 144 + x) * 3 + ch] =
            uint8_t(((y / 16) * 9 + x / 16) * 4 + ch + (y % 16 == 3 && x % 16 == 5 ? 1 : 0));
  Gemma4ProcessorConfig config;
  config.max_soft_tokens = 6;
  const ProcessedImage px = gemma4_process(img, config);  // already at its target size
  ASSERT_EQ(px.rows, 54);
  ASSERT_EQ(px.cols, 768);
  EXPECT_EQ(px.grid_h, 6);
  EXPECT_EQ(px.grid_w, 9);
  EXPECT_EQ(px.tokens_h, 2);
  EXPECT_EQ(px.tokens_w, 3);
  EXPECT_EQ(px.resized.rgb, img.rgb);
  for (int row = 0; row < 54; ++row)
    for (int py = 0; py < 16; ++py)
      for (int pxl = 0; pxl < 16; ++pxl)
        for (int ch = 0; ch < 3; ++ch) {
          const int want = row * 4 + ch + (py == 3 && pxl == 5 ? 1 : 0);
          ASSERT_FLOAT_EQ(px.values[size_t(row) * 768 + size_t(py * 16 + pxl) * 3 + size_t(ch)], float(want / 255.0))
              << "row " << row << " (" << py << ", " << pxl << ") channel " << ch;
        }
}

}  // namespace
}  // namespace nextn::vision
