// model/mrope.h — M-RoPE positions (Qwen3.5 / Qwen3-VL) for a prompt holding images.
// Text rows get (p, p, p) with a running p; the rows of an image whose merged grid is
// gh × gw (row-major, one row per 2×2 patch window) get (p0, p0 + r, p0 + c), and the
// running position then advances by max(gh, gw), not gh·gw. Afterwards every new row i of
// the sequence (sequence index) sits at i + rope_delta on all axes, rope_delta =
// (max position + 1) − rows so far (SequenceRows::position_offset).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace nextn {

struct ImageRows {
  int row = 0;     // first row of the image's placeholders in the prompt
  int grid_h = 0;  // merged grid (the language model's): rows = grid_h · grid_w
  int grid_w = 0;
};

// (t, h, w) for rows [0, n) of a sequence starting at position 0: out [n × 3]. `images`
// in order, not overlapping, inside [0, n). Returns rope_delta.
int mrope_positions(int n, std::span<const ImageRows> images, std::vector<int32_t>& out);

}  // namespace nextn
