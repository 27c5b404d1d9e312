// model/mrope.cc — M-RoPE positions of a prompt (model/mrope.h).
#include "model/mrope.h"

#include <algorithm>

#include "util/error.h"

namespace nextn {

int mrope_positions(int n, std::span<const ImageRows> images, std::vector<int32_t>& out) {
  out.assign(size_t(n) * 3, 0);
  int row = 0, cur = 0, max_pos = -1;
  auto text_until = [&](int end) {
    for (; row < end; ++row, ++cur) {
      std::fill_n(out.data() + size_t(row) * 3, 3, cur);
      max_pos = std::max(max_pos, cur);
    }
  };
  for (const ImageRows& im : images) {
    const int count = im.grid_h * im.grid_w;
    if (im.row < row || im.grid_h <= 0 || im.grid_w <= 0 || im.row + count > n)
      fail(ErrorKind::kInternal, "M-RoPE: image rows [{}, {}) out of order or outside 0..{}", im.row, im.row + count, n);
    text_until(im.row);
    for (int r = 0; r < im.grid_h; ++r)
      for (int c = 0; c < im.grid_w; ++c, ++row) {
        int32_t* p = out.data() + size_t(row) * 3;
        p[0] = cur, p[1] = cur + r, p[2] = cur + c;
      }
    max_pos = std::max(max_pos, cur + std::max(im.grid_h, im.grid_w) - 1);
    cur += std::max(im.grid_h, im.grid_w);
  }
  text_until(n);
  return max_pos + 1 - n;
}

}  // namespace nextn
