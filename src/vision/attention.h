// vision/attention.h — full (bidirectional) attention over the patches of one image,
// shared by the vision towers: every patch attends to every patch, per head, as two
// engine matmuls per block of queries (scores = q·Kᵀ with K as a [P, d] "weight", a
// softmax per row, then scores·V with V transposed to [d, P]). Query blocks bound the
// scores buffer to 256 × P floats whatever the image size.
#pragma once
#include <cstdint>

namespace nextn::vision {

// q, k, v: P rows each, row i's heads at q + i·q_stride (heads × d contiguous; likewise
// k, v); out: [P, heads·d]. softmax(q·kᵀ·scale)·v per head.
void image_attention(const float* q, int64_t q_stride, const float* k, int64_t k_stride, const float* v,
                     int64_t v_stride, int64_t P, int64_t heads, int64_t d, float scale, float* out);

}  // namespace nextn::vision
