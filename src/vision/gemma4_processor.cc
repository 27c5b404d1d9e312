// vision/gemma4_processor.cc — the budget-filling resize and the raster patch order of
// the Gemma 4 image processor (see gemma4_processor.h).
#include "vision/gemma4_processor.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "vision/resize.h"

namespace nextn::vision {

Gemma4ProcessorConfig Gemma4ProcessorConfig::from_json(const nlohmann::json& j) {
  Gemma4ProcessorConfig c;
  if (!j.is_object()) fail(ErrorKind::kBadInput, "image processor config: expected an object");
  auto read_int = [&](const char* key, int& into) {
    if (!j.contains(key) || j[key].is_null()) return;
    if (!j[key].is_number_integer()) fail(ErrorKind::kBadInput, "image processor config: {} must be an integer", key);
    into = j[key].get<int>();
  };
  read_int("patch_size", c.patch_size);
  read_int("pooling_kernel_size", c.pooling_kernel_size);
  read_int("max_soft_tokens", c.max_soft_tokens);
  if (c.patch_size < 1 || c.pooling_kernel_size < 1 || c.max_soft_tokens < 1)
    fail(ErrorKind::kBadInput, "image processor config: patch_size {}, pooling_kernel_size {}, max_soft_tokens {} (all must be >= 1)",
         c.patch_size, c.pooling_kernel_size, c.max_soft_tokens);
  return c;
}

Gemma4Size gemma4_target_size(int height, int width, const Gemma4ProcessorConfig& c) {
  if (height < 1 || width < 1) fail(ErrorKind::kBadInput, "image is {}×{} pixels", width, height);
  const int64_t k = c.pooling_kernel_size, p = c.patch_size, side = c.side_multiple();
  const int64_t max_patches = int64_t(c.max_soft_tokens) * k * k;
  // The same double operations, in the same order, as the Python reference.
  const double target_px = double(max_patches * p * p);
  const double factor = std::sqrt(target_px / (double(height) * double(width)));
  int64_t th = int64_t(std::floor(factor * height / double(side))) * side;
  int64_t tw = int64_t(std::floor(factor * width / double(side))) * side;
  if (th == 0 && tw == 0)
    fail(ErrorKind::kBadInput, "image is {}×{} pixels; a budget of {} tokens leaves no patch of it", width, height,
         c.max_soft_tokens);
  // A very thin picture: the short side gets one pooled row, the long one as many as the
  // aspect ratio says, within the budget.
  const int64_t max_side = max_patches / (k * k) * side;
  if (th == 0) {
    th = side;
    tw = std::min<int64_t>(int64_t(width / height) * side, max_side);
  } else if (tw == 0) {
    tw = side;
    th = std::min<int64_t>(int64_t(height / width) * side, max_side);
  }
  return {int(th), int(tw)};
}

ProcessedImage gemma4_patchify(const DecodedImage& img, const Gemma4ProcessorConfig& c) {
  const int p = c.patch_size, k = c.pooling_kernel_size;
  if (img.width % c.side_multiple() != 0 || img.height % c.side_multiple() != 0)
    fail(ErrorKind::kBadInput, "image {}×{} is not a multiple of patch × pooling kernel = {}", img.width, img.height,
         c.side_multiple());
  ProcessedImage out;
  out.grid_t = 1;
  out.grid_h = img.height / p;
  out.grid_w = img.width / p;
  out.rows = int64_t(out.grid_h) * out.grid_w;
  out.cols = int64_t(3) * p * p;
  out.values.resize(size_t(out.rows * out.cols));
  // Row r·grid_w + c holds patch (r, c); inside it (py, px, channel), channel fastest:
  // the pixels of one patch row are contiguous in the RGB buffer already.
  for (int r = 0; r < out.grid_h; ++r)
    for (int col = 0; col < out.grid_w; ++col) {
      float* dst = out.values.data() + size_t((int64_t(r) * out.grid_w + col) * out.cols);
      for (int py = 0; py < p; ++py) {
        const uint8_t* src = img.rgb.data() + (size_t(r * p + py) * size_t(img.width) + size_t(col * p)) * 3;
        for (int i = 0; i < 3 * p; ++i) dst[size_t(py) * 3 * p + size_t(i)] = float(src[i] * (1.0 / 255.0));
      }
    }
  out.tokens_h = out.grid_h / k;
  out.tokens_w = out.grid_w / k;
  out.resized = img;
  return out;
}

ProcessedImage gemma4_process(const DecodedImage& image, const Gemma4ProcessorConfig& c) {
  const Gemma4Size t = gemma4_target_size(image.height, image.width, c);
  return gemma4_patchify(resize_bicubic(image, t.width, t.height), c);
}

}  // namespace nextn::vision
