// io/tensor.cc — TensorView helpers.
#include "io/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nextn {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace nextn
