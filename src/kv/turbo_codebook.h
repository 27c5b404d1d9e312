// kv/turbo_codebook.h — TurboQuant's Lloyd–Max scalar codebooks.
// After a randomized Hadamard rotation of a unit vector in R^d, each coordinate
// follows f(x) ∝ (1 − x²)^((d−3)/2) on [−1, 1] (≈ N(0, 1/d)). The codebook with
// 2^bits centroids is the Lloyd–Max quantizer of that density: boundaries are
// midpoints of adjacent centroids, each centroid the conditional mean of its
// cell. Values are hard-coded (computed offline by numerical integration;
// tests/kv/turbo_codebook_test.cc re-derives them) for d ∈ {64, 128}, bits ∈ {2, 3, 4}.
#pragma once
#include <cstdint>

namespace nextn {

struct TurboCodebook {
  int bits = 0;
  int dim = 0;                // rotation block the codebook is for
  int size = 0;               // 2^bits
  float centroids[16] = {};   // ascending
  float boundaries[15] = {};  // ascending, size − 1 of them

  // Index of the nearest centroid: how many boundaries y exceeds (binary search).
  uint8_t quantize(float y) const {
    int idx = 0;
    for (int step = size / 2; step >= 1; step /= 2) idx += y > boundaries[idx + step - 1] ? step : 0;
    return static_cast<uint8_t>(idx);
  }
};

// Throws nextn::Error for unsupported (bits, dim).
const TurboCodebook& turbo_codebook(int bits, int dim);

}  // namespace nextn
