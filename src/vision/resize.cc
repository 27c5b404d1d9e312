// vision/resize.cc — PIL's Image.resize(..., BICUBIC) for 8-bit RGB (see resize.h).
#include "vision/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "util/error.h"

namespace nextn::vision {

namespace {

// The cubic convolution kernel with a = −0.5 (Keys), support 2.
double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's fixed point for 8-bit images

// One axis of a resize: for output index i, weights[i·ksize + j] apply to input
// first[i] + j, j < count[i].
struct AxisWeights {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

AxisWeights axis_weights(int in_size, int out_size) {
  AxisWeights a;
  const double scale = double(in_size) / double(out_size);
  const double filter_scale = std::max(scale, 1.0);  // shrinking widens the kernel
  const double support = 2.0 * filter_scale;
  a.ksize = int(std::ceil(support)) * 2 + 1;
  a.first.resize(size_t(out_size));
  a.count.resize(size_t(out_size));
  a.weights.assign(size_t(out_size) * size_t(a.ksize), 0);
  std::vector<double> k(size_t(a.ksize));
  const double ss = 1.0 / filter_scale;  // multiplied, not divided: PIL's exact doubles
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    // Truncation toward zero, as PIL's (int) cast; negative starts clamp to 0 anyway.
    int lo = int(center - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = int(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int n = hi - lo;
    double total = 0.0;
    for (int j = 0; j < n; ++j) {
      k[size_t(j)] = bicubic((j + lo - center + 0.5) * ss);
      total += k[size_t(j)];
    }
    for (int j = 0; j < n; ++j) {
      const double w = total != 0.0 ? k[size_t(j)] / total : k[size_t(j)];
      // Rounded half away from zero into fixed point.
      a.weights[size_t(i) * a.ksize + size_t(j)] =
          int32_t(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    a.first[size_t(i)] = lo;
    a.count[size_t(i)] = n;
  }
  return a;
}

uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return uint8_t(v >> kPrecisionBits);
}

// One pass along x (horizontal) or y; every pass starts from half a unit (rounding).
DecodedImage resample_pass(const DecodedImage& in, int out_size, bool horizontal) {
  const AxisWeights a = axis_weights(horizontal ? in.width : in.height, out_size);
  DecodedImage out;
  out.width = horizontal ? out_size : in.width;
  out.height = horizontal ? in.height : out_size;
  out.rgb.resize(size_t(out.width) * size_t(out.height) * 3);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      const int i = horizontal ? x : y;
      const int32_t* w = a.weights.data() + size_t(i) * a.ksize;
      int32_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int j = 0; j < a.count[size_t(i)]; ++j) {
        const int sx = horizontal ? a.first[size_t(i)] + j : x;
        const int sy = horizontal ? y : a.first[size_t(i)] + j;
        const uint8_t* p = in.rgb.data() + (size_t(sy) * size_t(in.width) + size_t(sx)) * 3;
        for (int c = 0; c < 3; ++c) acc[c] += int32_t(p[c]) * w[j];
      }
      uint8_t* o = out.rgb.data() + (size_t(y) * size_t(out.width) + size_t(x)) * 3;
      for (int c = 0; c < 3; ++c) o[c] = clip8(acc[c]);
    }
  }
  return out;
}

}  // namespace

DecodedImage resize_bicubic(const DecodedImage& image, int width, int height) {
  if (width < 1 || height < 1) fail(ErrorKind::kBadInput, "resize to {}×{}: no pixels", width, height);
  DecodedImage out = image;
  if (width != out.width) out = resample_pass(out, width, true);
  if (height != out.height) out = resample_pass(out, height, false);
  return out;
}

}  // namespace nextn::vision
