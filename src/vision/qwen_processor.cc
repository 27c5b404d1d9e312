// vision/qwen_processor.cc — smart_resize, normalization and the merge-window patch
// order of the Qwen3.5 image processor (the resize itself: vision/resize.h).
#include "vision/qwen_processor.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "vision/resize.h"

namespace nextn::vision {

namespace {

// Python's round(v / factor) · factor for non-negative integers: halves go to the even
// quotient (80/32 = 2.5 → 2, where C's round gives 3).
int64_t round_half_even_multiple(int64_t v, int64_t factor) {
  int64_t q = v / factor;
  const int64_t twice_r = 2 * (v % factor);
  if (twice_r > factor || (twice_r == factor && (q & 1))) ++q;
  return q * factor;
}

}  // namespace

QwenProcessorConfig QwenProcessorConfig::from_json(const nlohmann::json& j) {
  QwenProcessorConfig c;
  auto read_int = [&](const nlohmann::json& obj, const char* key, auto& into) {
    if (obj.contains(key) && obj[key].is_number_integer()) into = obj[key].get<std::decay_t<decltype(into)>>();
  };
  read_int(j, "patch_size", c.patch_size);
  read_int(j, "temporal_patch_size", c.temporal_patch_size);
  read_int(j, "merge_size", c.merge_size);
  read_int(j, "min_pixels", c.min_pixels);  // older Qwen2-VL configs
  read_int(j, "max_pixels", c.max_pixels);
  if (j.contains("size") && j["size"].is_object()) {
    read_int(j["size"], "shortest_edge", c.min_pixels);
    read_int(j["size"], "longest_edge", c.max_pixels);
  }
  auto read_triple = [&](const char* key, std::array<double, 3>& into) {
    if (!j.contains(key)) return;
    const nlohmann::json& v = j[key];
    if (!v.is_array() || v.size() != 3) fail(ErrorKind::kBadInput, "preprocessor config: {} must be 3 numbers", key);
    for (size_t i = 0; i < 3; ++i) into[i] = v[i].get<double>();
  };
  read_triple("image_mean", c.mean);
  read_triple("image_std", c.std);
  if (j.contains("rescale_factor") && j["rescale_factor"].is_number()) c.rescale_factor = j["rescale_factor"].get<double>();
  if (j.value("do_rescale", true) == false) c.rescale_factor = 1.0;
  if (j.value("do_normalize", true) == false) c.mean = {0, 0, 0}, c.std = {1, 1, 1};
  if (c.patch_size < 1 || c.temporal_patch_size < 1 || c.merge_size < 1 || c.min_pixels < 1 ||
      c.max_pixels < c.min_pixels)
    fail(ErrorKind::kBadInput, "preprocessor config: invalid patch/merge sizes or pixel bounds");
  for (double s : c.std)
    if (s == 0.0) fail(ErrorKind::kBadInput, "preprocessor config: image_std has a zero");
  return c;
}

ResizeTarget smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels) {
  if (height < 10 || width < 10)
    fail(ErrorKind::kBadInput, "image is {}×{} pixels; the Qwen processor needs at least 10 on each side", width,
         height);
  if (double(std::max(height, width)) / std::min(height, width) > 200)
    fail(ErrorKind::kBadInput, "image is {}×{} pixels; the Qwen processor refuses aspect ratios over 200:1", width,
         height);
  int64_t h = round_half_even_multiple(height, factor), w = round_half_even_multiple(width, factor);
  // The same double operations, in the same order, as the Python reference.
  if (h * w > max_pixels) {
    const double beta = std::sqrt(double(int64_t(height) * width) / double(max_pixels));
    h = std::max<int64_t>(factor, int64_t(std::floor(height / beta / factor)) * factor);
    w = std::max<int64_t>(factor, int64_t(std::floor(width / beta / factor)) * factor);
  } else if (h * w < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / double(int64_t(height) * width));
    h = int64_t(std::ceil(height * beta / factor)) * factor;
    w = int64_t(std::ceil(width * beta / factor)) * factor;
  }
  return {int(h), int(w)};
}

ProcessedImage qwen_patchify(const DecodedImage& img, const QwenProcessorConfig& c) {
  const int p = c.patch_size, m = c.merge_size, T = c.temporal_patch_size;
  if (img.width % (p * m) != 0 || img.height % (p * m) != 0)
    fail(ErrorKind::kBadInput, "image {}×{} is not a multiple of patch × merge = {}", img.width, img.height, p * m);
  ProcessedImage out;
  out.grid_t = 1;  // one still image: its frame repeated T times fills one temporal patch
  out.grid_h = img.height / p;
  out.grid_w = img.width / p;
  out.rows = int64_t(out.grid_t) * out.grid_h * out.grid_w;
  out.cols = int64_t(3) * T * p * p;
  out.values.resize(size_t(out.rows * out.cols));
  // x/255 then (x − mean)/std, per channel, for each of the 256 byte values.
  std::array<std::array<float, 256>, 3> lut;
  for (int ch = 0; ch < 3; ++ch)
    for (int v = 0; v < 256; ++v) lut[size_t(ch)][size_t(v)] = float((v * c.rescale_factor - c.mean[size_t(ch)]) / c.std[size_t(ch)]);
  // Rows enumerate (block row, block column, row in block, column in block), so that each
  // m × m merge window is m² consecutive rows; within a row: (channel, t, y, x).
  int64_t row = 0;
  for (int bh = 0; bh < out.grid_h / m; ++bh)
    for (int bw = 0; bw < out.grid_w / m; ++bw)
      for (int ih = 0; ih < m; ++ih)
        for (int iw = 0; iw < m; ++iw, ++row) {
          const int r = bh * m + ih, col = bw * m + iw;
          float* dst = out.values.data() + size_t(row * out.cols);
          for (int ch = 0; ch < 3; ++ch)
            for (int t = 0; t < T; ++t)
              for (int py = 0; py < p; ++py) {
                const uint8_t* src = img.rgb.data() + (size_t(r * p + py) * size_t(img.width) + size_t(col * p)) * 3;
                float* d = dst + ((size_t(ch) * T + size_t(t)) * p + size_t(py)) * p;
                for (int px = 0; px < p; ++px) d[px] = lut[size_t(ch)][src[px * 3 + ch]];
              }
        }
  out.tokens_h = out.grid_h / m;
  out.tokens_w = out.grid_w / m;
  out.resized = img;
  return out;
}

ProcessedImage qwen_process(const DecodedImage& image, const QwenProcessorConfig& c) {
  const ResizeTarget target = smart_resize(image.height, image.width, c.factor(), c.min_pixels, c.max_pixels);
  return qwen_patchify(resize_bicubic(image, target.width, target.height), c);
}

}  // namespace nextn::vision
