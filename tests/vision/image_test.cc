// tests/vision/image_test.cc — the decoders against pixels the test encoded itself, the
// limits checked from the header (bombs, 0×0, 100000×1), corrupt and truncated files,
// media types, and data: URLs with their base64.
#include "vision/image.h"

#include <gtest/gtest.h>

#include "util/error.h"
#include "vision/data_url.h"
#include "vision_test_util.h"

namespace nextn::vision {
namespace {

using namespace testing_vision;

// The message of the kBadInput Error fn throws ("" when it does not).
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(int(e.kind()), int(ErrorKind::kBadInput)) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

#define EXPECT_CONTAINS(text, fragment) \
  EXPECT_NE(std::string(text).find(fragment), std::string::npos) << "'" << (fragment) << "' not in: " << (text)

const ImageLimits kLimits;

TEST(DecodeImage, PngRgbIsExact) {
  auto px = pattern(7, 5);
  DecodedImage img = decode_image(encode_png(7, 5, px, 3), "image/png", kLimits);
  EXPECT_EQ(img.width, 7);
  EXPECT_EQ(img.height, 5);
  EXPECT_EQ(img.rgb, px);
}

TEST(DecodeImage, PngGreyBecomesRgb) {
  auto grey = pattern(4, 3, 1);
  DecodedImage img = decode_image(encode_png(4, 3, grey, 1), "image/png", kLimits);
  for (size_t i = 0; i < grey.size(); ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(img.rgb[i * 3 + c], grey[i]);
}

// Alpha composited onto white: c·a/255 + 255·(1 − a/255), rounded.
TEST(DecodeImage, AlphaIsCompositedOnWhite) {
  auto rgba = pattern(6, 4, 4);
  rgba[3] = 0;    // fully transparent: white
  rgba[7] = 255;  // opaque: itself
  for (const std::string& file : {encode_png(6, 4, rgba, 4), encode_webp(6, 4, rgba, 4)}) {
    DecodedImage img = decode_image(file, sniff_image_format(file) == ImageFormat::kPng ? "image/png" : "image/webp",
                                    kLimits);
    for (size_t i = 0; i < 24; ++i) {
      const double a = rgba[i * 4 + 3] / 255.0;
      for (int c = 0; c < 3; ++c) {
        const double want = rgba[i * 4 + c] * a + 255.0 * (1 - a);
        EXPECT_NEAR(img.rgb[i * 3 + c], want, 0.5 + 1e-9) << "pixel " << i << " channel " << c;
      }
    }
    EXPECT_EQ(img.rgb[0], 255);
    EXPECT_EQ(img.rgb[3], rgba[4]);
  }
}

TEST(DecodeImage, WebpLosslessIsExact) {
  auto px = pattern(9, 3);
  DecodedImage img = decode_image(encode_webp(9, 3, px, 3), "image/webp", kLimits);
  EXPECT_EQ(img.width, 9);
  EXPECT_EQ(img.rgb, px);
}

TEST(DecodeImage, JpegIsClose) {
  // A smooth gradient survives quality-95 JPEG within a few levels.
  const int w = 32, h = 16;
  std::vector<uint8_t> px(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) px[(size_t(y) * w + x) * 3 + c] = uint8_t(x * 4 + y * 2 + c * 30);
  DecodedImage img = decode_image(encode_jpeg(w, h, px), "image/jpeg", kLimits);
  ASSERT_EQ(img.width, w);
  ASSERT_EQ(img.height, h);
  for (size_t i = 0; i < px.size(); ++i) EXPECT_NEAR(img.rgb[i], px[i], 8) << i;
}

TEST(DecodeImage, GifFirstFrameWithTransparencyAndInterlace) {
  const int w = 5, h = 11;  // 11 rows: every interlace pass has rows
  std::vector<GifColorType> colors = {{10, 20, 30}, {200, 100, 50}, {0, 255, 0}};
  std::vector<uint8_t> index(size_t(w) * h);
  for (size_t i = 0; i < index.size(); ++i) index[i] = uint8_t((i * 7 + i / w) % 3);
  for (bool interlace : {false, true}) {
    DecodedImage img = decode_image(encode_gif(w, h, index, colors, 2, interlace), "image/gif", kLimits);
    ASSERT_EQ(img.width, w);
    ASSERT_EQ(img.height, h);
    for (size_t i = 0; i < index.size(); ++i) {
      const GifColorType c = index[i] == 2 ? GifColorType{255, 255, 255} : colors[index[i]];
      EXPECT_EQ(img.rgb[i * 3 + 0], c.Red) << i << (interlace ? " interlaced" : "");
      EXPECT_EQ(img.rgb[i * 3 + 1], c.Green) << i;
      EXPECT_EQ(img.rgb[i * 3 + 2], c.Blue) << i;
    }
  }
}

TEST(DecodeImage, MislabelledImageDecodesByItsMagicNumber) {
  auto px = pattern(3, 3);
  EXPECT_EQ(decode_image(encode_png(3, 3, px, 3), "image/jpeg", kLimits).rgb, px);
}

TEST(DecodeImage, LimitsAreCheckedFromTheHeader) {
  // Headers claiming huge canvases over a few bytes of data: refused before any allocation
  // (the data would not even fill one row).
  EXPECT_CONTAINS(error_of([] { decode_image(png_with_header(100000, 1, std::string(8, '\0')), "image/png", kLimits); }),
                  "100000×1");
  EXPECT_CONTAINS(error_of([] { decode_image(png_with_header(16000, 16000, std::string(8, '\0')), "image/png", kLimits); }),
                  "256000000 pixels; the limit is 33554432");
  EXPECT_CONTAINS(error_of([] { decode_image(png_with_header(8000, 20, std::string(8, '\0')), "image/png", kLimits); }),
                  "aspect ratio of 400:1");
  // A real decompression bomb: 6000×6000 of zeros is 108 MB raw, ~100 KB compressed.
  std::string bomb = png_with_header(6000, 6000, std::string(size_t(6000) * (6000 * 3 + 1), '\0'));
  EXPECT_LT(bomb.size(), 200000u);
  EXPECT_CONTAINS(error_of([&] { decode_image(bomb, "image/png", kLimits); }), "36000000 pixels");
  // The same checks for the other formats' headers.
  ImageLimits small;
  small.max_pixels = 20;
  auto px = pattern(5, 5);
  EXPECT_CONTAINS(error_of([&] { decode_image(encode_jpeg(5, 5, px), "image/jpeg", small); }), "JPEG image is 5×5");
  EXPECT_CONTAINS(error_of([&] { decode_image(encode_webp(5, 5, px, 3), "image/webp", small); }), "WebP image is 5×5");
  std::vector<uint8_t> index(25, 0);
  EXPECT_CONTAINS(error_of([&] { decode_image(encode_gif(5, 5, index, {{1, 2, 3}}), "image/gif", small); }),
                  "GIF image is 5×5");
  small = ImageLimits{};
  small.max_bytes = 10;
  EXPECT_CONTAINS(error_of([&] { decode_image(encode_png(5, 5, px, 3), "image/png", small); }), "the limit is 10");
}

TEST(DecodeImage, EmptyCanvasIsRefused) {
  std::string gif = encode_gif(2, 2, {0, 0, 0, 0}, {{1, 2, 3}});
  gif[6] = gif[7] = gif[8] = gif[9] = 0;  // logical screen 0×0
  EXPECT_CONTAINS(error_of([&] { decode_image(gif, "image/gif", kLimits); }), "no pixels (0×0)");
  // libpng refuses a zero IHDR itself.
  EXPECT_CONTAINS(error_of([] { decode_image(png_with_header(0, 0, ""), "image/png", kLimits); }), "PNG");
}

TEST(DecodeImage, CorruptAndTruncatedFilesAreErrors) {
  auto px = pattern(16, 16);
  struct Case {
    std::string file, media_type, fragment;
  } cases[] = {
      {encode_png(16, 16, px, 3), "image/png", "PNG"},
      {encode_jpeg(16, 16, px), "image/jpeg", "JPEG"},
      {encode_webp(16, 16, px, 3), "image/webp", "WebP"},
      {encode_gif(16, 16, std::vector<uint8_t>(256, 1), {{0, 0, 0}, {9, 9, 9}}), "image/gif", "GIF"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.media_type);
    // Cut at several points, from just after the magic number to just before the end.
    for (size_t keep : {size_t(12), c.file.size() / 2, c.file.size() - 15}) {
      std::string cut = c.file.substr(0, keep);
      EXPECT_CONTAINS(error_of([&] { decode_image(cut, c.media_type, kLimits); }), c.fragment);
    }
  }
  // A flipped byte inside PNG data fails its CRC.
  std::string png = encode_png(16, 16, px, 3);
  png[png.size() / 2] ^= 0x55;
  EXPECT_CONTAINS(error_of([&] { decode_image(png, "image/png", kLimits); }), "PNG");
}

TEST(DecodeImage, MediaTypesAndUnknownBytes) {
  auto px = pattern(2, 2);
  EXPECT_CONTAINS(error_of([&] { decode_image(encode_png(2, 2, px, 3), "image/bmp", kLimits); }),
                  "unsupported media type 'image/bmp'");
  EXPECT_CONTAINS(error_of([] { decode_image("BM\x01\x02 not an image", "image/png", kLimits); }),
                  "not a PNG, JPEG, WebP or GIF");
  EXPECT_CONTAINS(error_of([] { decode_image("", "image/png", kLimits); }), "empty");
  EXPECT_EQ(format_of_media_type("IMAGE/JPG"), ImageFormat::kJpeg);
}

TEST(DataUrl, ParsesBase64) {
  DataUrl d = parse_data_url("data:Image/PNG;name=x.png;base64,aGVsbG8gd29ybGQ=", 1000);
  EXPECT_EQ(d.media_type, "image/png");
  EXPECT_EQ(d.bytes, "hello world");
  EXPECT_EQ(parse_data_url("data:image/gif;base64,aGVsbG8gd29ybGQ", 1000).bytes, "hello world");  // unpadded
  EXPECT_EQ(parse_data_url("data:image/gif;base64,aGVs\nbG8=", 1000).bytes, "hello");            // line breaks
  EXPECT_TRUE(is_data_url("DATA:x"));
  EXPECT_FALSE(is_data_url("https://example.com/a.png"));
}

TEST(DataUrl, ErrorsNameTheProblem) {
  EXPECT_CONTAINS(error_of([] { parse_data_url("data:image/png;base64", 100); }), "no ','");
  EXPECT_CONTAINS(error_of([] { parse_data_url("data:image/png,abcd", 100); }), "not base64");
  EXPECT_CONTAINS(error_of([] { parse_data_url("data:;base64,abcd", 100); }), "no media type");
  EXPECT_CONTAINS(error_of([] { parse_data_url("data:image/png;base64,ab*d", 100); }), "character 0x2a at offset 2");
  EXPECT_CONTAINS(error_of([] { parse_data_url("data:image/png;base64,ab=cd", 100); }), "after '=' padding");
  EXPECT_CONTAINS(error_of([] { parse_data_url("data:image/png;base64,abcde", 100); }), "ends inside a byte");
  EXPECT_CONTAINS(error_of([] { parse_data_url("data:image/png;base64," + std::string(400, 'A'), 100); }),
                  "the limit is 100");
}

}  // namespace
}  // namespace nextn::vision
