// kernels/tiling.h — the order in which a matmul visits its tiles, shared by the float
// (matmul.cc), block-quantized (quant_matmul-inl.h) and interleaved (interleaved-inl.h)
// matmuls: one loop, so that a change of blocking reaches all of them.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace nextn {

// Covers activation rows [0, n_rows) × outputs [o_begin, o_end) with tiles. The rows go
// in passes of at most `max_rows`; pass(r, rows) is called once per pass and output block
// and returns the tile function, tile(o, outs), called for each run of tile_outs(rows)
// outputs (the last of a block may be narrower). When one pass cannot take every row, the
// outputs go in blocks (a multiple of `unit`) whose weights, w_row_bytes each, stay in L2
// while every pass goes over them; within a block a pass's activations stay in L1.
template <class TileOuts, class Pass>
inline void for_each_tile(int64_t n_rows, int64_t o_begin, int64_t o_end, size_t w_row_bytes, int max_rows,
                          int64_t unit, TileOuts tile_outs, Pass pass) {
  constexpr size_t kL2Bytes = 256 * 1024;
  int64_t block = n_rows <= max_rows ? o_end - o_begin
                                     : static_cast<int64_t>(kL2Bytes / std::max<size_t>(1, w_row_bytes));
  block = std::max<int64_t>(unit, block / unit * unit);
  for (int64_t ob = o_begin; ob < o_end; ob += block) {
    const int64_t ob_end = std::min(o_end, ob + block);
    for (int64_t r = 0; r < n_rows; r += max_rows) {
      const int rows = static_cast<int>(std::min<int64_t>(max_rows, n_rows - r));
      const int64_t outs = tile_outs(rows);
      auto tile = pass(r, rows);
      for (int64_t o = ob; o < ob_end; o += outs) tile(o, std::min(outs, ob_end - o));
    }
  }
}

}  // namespace nextn
