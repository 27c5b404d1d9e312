// tests/fuzz/image_fuzz.cc — any bytes given as an image (or as a data: URL) are either
// decoded to width × height × 3 bytes within the limits or refused with a nextn::Error
// naming the problem; never a crash, an out-of-bounds access or an allocation beyond the
// limits (decompression bombs are refused from the header). A small image then goes
// through the Qwen3.5 processor (smart_resize, bicubic resize, patches).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "util/error.h"
#include "vision/data_url.h"
#include "vision/image.h"
#include "vision/qwen_processor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // First byte: even = the rest is an image file, odd = the rest is a data: URL's text.
  const bool url = data[0] & 1;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  nextn::vision::ImageLimits limits;
  limits.max_pixels = 1 << 22;  // smaller than the server's, so each run stays fast
  try {
    nextn::vision::DecodedImage image;
    if (url) {
      nextn::vision::DataUrl d = nextn::vision::parse_data_url(rest, limits.max_bytes);
      image = nextn::vision::decode_image(d.bytes, d.media_type, limits);
    } else {
      image = nextn::vision::decode_image(rest, "image/png", limits);
    }
    if (image.width < 1 || image.height < 1 || int64_t(image.width) * image.height > limits.max_pixels ||
        image.rgb.size() != size_t(image.width) * size_t(image.height) * 3)
      std::abort();  // a decoder returned something the limits forbid
    nextn::vision::QwenProcessorConfig config;
    config.min_pixels = 1024;
    config.max_pixels = 16384;
    nextn::vision::ProcessedImage px = nextn::vision::qwen_process(image, config);
    // (smart_resize may exceed max_pixels: its 32-pixel floor on each side wins, as in the
    // reference, so only the shapes are checked.)
    if (px.values.size() != size_t(px.rows * px.cols) || px.resized.width != px.grid_w * config.patch_size ||
        px.resized.height != px.grid_h * config.patch_size)
      std::abort();
  } catch (const nextn::Error&) {
  }
  return 0;
}
