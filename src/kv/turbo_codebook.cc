// kv/turbo_codebook.cc — the hard-coded Lloyd–Max tables (see turbo_codebook.h).
// Only positive halves are listed; the codebooks are symmetric.
#include "kv/turbo_codebook.h"

#include <vector>

#include "util/error.h"

namespace nextn {

namespace {

// Positive centroids of the exact-Beta Lloyd–Max quantizer, d·MSE in the comment.
constexpr float kD64B2[] = {0.056514869f, 0.187496849f};                              // 0.1145
constexpr float kD64B3[] = {0.030469179f, 0.093832263f, 0.166167859f, 0.263913931f};  // 0.0334
constexpr float kD64B4[] = {0.015919023f, 0.048089783f, 0.081311769f, 0.116486752f,
                            0.154925528f, 0.198856141f, 0.252913728f, 0.330796311f};  // 0.00913
constexpr float kD128B2[] = {0.039991595f, 0.133041520f};                              // 0.1160
constexpr float kD128B3[] = {0.021604311f, 0.066585608f, 0.118139767f, 0.188397186f};  // 0.0340
constexpr float kD128B4[] = {0.011302497f, 0.034151571f, 0.057772299f, 0.082828457f,
                             0.110288369f, 0.141805197f, 0.180835964f, 0.237663827f};  // 0.00931

TurboCodebook build(int bits, int dim, const float* positive) {
  TurboCodebook cb;
  cb.bits = bits;
  cb.dim = dim;
  cb.size = 1 << bits;
  int half = cb.size / 2;
  for (int i = 0; i < half; ++i) {
    cb.centroids[half + i] = positive[i];
    cb.centroids[half - 1 - i] = -positive[i];
  }
  for (int i = 0; i + 1 < cb.size; ++i) cb.boundaries[i] = 0.5f * (cb.centroids[i] + cb.centroids[i + 1]);
  cb.boundaries[half - 1] = 0.0f;
  return cb;
}

}  // namespace

const TurboCodebook& turbo_codebook(int bits, int dim) {
  static const TurboCodebook tables[2][3] = {
      {build(2, 64, kD64B2), build(3, 64, kD64B3), build(4, 64, kD64B4)},
      {build(2, 128, kD128B2), build(3, 128, kD128B3), build(4, 128, kD128B4)},
  };
  if ((dim != 64 && dim != 128) || bits < 2 || bits > 4)
    fail(ErrorKind::kUnsupported, "turbo codebook: no table for {} bits at block size {}", bits, dim);
  return tables[dim == 128][bits - 2];
}

}  // namespace nextn
