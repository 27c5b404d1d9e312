// io/tensor.cc — TensorView helpers.
#include "io/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

namespace nextn {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

float TensorView::float_at(int64_t i) const {
  const char* p = static_cast<const char*>(data);
  if (dtype == DType::kF32) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
}

std::vector<float> TensorView::floats() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = float_at(static_cast<int64_t>(i));
  return out;
}

}  // namespace nextn
