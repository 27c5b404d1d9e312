// tests/vision/qwen_processor_test.cc — the Qwen3.5 processor's fixed points, checked
// without numpy: docs/vision-models.md's smart_resize examples and Python's half-to-even
// rounding, resize identities, and the merge-window patch order on a patch-index image
// (the numeric comparison with the reference is tests/model/test_vision_processor.py).
#include "vision/qwen_processor.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace nextn::vision {
namespace {

TEST(QwenProcessor, SmartResizeExamples) {
  struct Case {
    int h, w, want_h, want_w;
  } cases[] = {{100, 100, 256, 256}, {80, 400, 128, 576}, {750, 1000, 736, 992},
               {1080, 1920, 1088, 1920}, {4000, 6000, 3328, 4992}};
  for (const Case& c : cases) {
    ResizeTarget t = smart_resize(c.h, c.w, 32, 65536, 16777216);
    EXPECT_EQ(t.height, c.want_h) << c.h << "x" << c.w;
    EXPECT_EQ(t.width, c.want_w) << c.h << "x" << c.w;
  }
  // 80/32 = 2.5 → 2 and 112/32 = 3.5 → 4 (half to even), inside the pixel bounds.
  ResizeTarget t = smart_resize(80, 112, 32, 1024, 1 << 24);
  EXPECT_EQ(t.height, 64);
  EXPECT_EQ(t.width, 128);
  EXPECT_THROW(smart_resize(9, 100, 32, 1024, 1 << 24), Error);
  EXPECT_THROW(smart_resize(10, 2010, 32, 1024, 1 << 24), Error);
}

TEST(QwenProcessor, ResizeToTheSameSizeIsTheIdentity) {
  DecodedImage img{5, 3, {}};
  for (int i = 0; i < 45; ++i) img.rgb.push_back(uint8_t(i * 37));
  EXPECT_EQ(resize_bicubic(img, 5, 3).rgb, img.rgb);
  // A constant image stays constant through any resize (the weights sum to one).
  DecodedImage flat{7, 9, std::vector<uint8_t>(7 * 9 * 3, 200)};
  for (auto [w, h] : {std::pair{3, 4}, std::pair{20, 31}, std::pair{7, 2}})
    EXPECT_EQ(resize_bicubic(flat, w, h).rgb, std::vector<uint8_t>(size_t(w) * h * 3, 200)) << w << "x" << h;
}

TEST(QwenProcessor, PatchesRunInMergeWindowOrder) {
  // A 64×64 image whose 16×16 patches hold their raster index ×10 in the red channel,
  // index×10 + 1 in green and + 2 in blue.
  DecodedImage img{64, 64, std::vector<uint8_t>(64 * 64 * 3)};
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x)
      for (int c = 0; c < 3; ++c) img.rgb[(size_t(y) * 64 + x) * 3 + c] = uint8_t(((y / 16) * 4 + x / 16) * 10 + c);
  ProcessedImage px = qwen_patchify(img, QwenProcessorConfig{});
  ASSERT_EQ(px.rows, 16);
  ASSERT_EQ(px.cols, 1536);
  EXPECT_EQ(px.grid_h, 4);
  EXPECT_EQ(px.grid_w, 4);
  const int want[16] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 512; ++k)  // (channel, t, y, x): 512 values per channel
        ASSERT_FLOAT_EQ(px.values[size_t(r) * 1536 + size_t(c) * 512 + size_t(k)],
                        float((want[r] * 10 + c) / 127.5 - 1.0))
            << "row " << r << " channel " << c << " element " << k;
}

}  // namespace
}  // namespace nextn::vision
