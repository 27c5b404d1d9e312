// tests/kv/turbo_codebook_test.cc — the hard-coded TurboQuant codebooks against
// their definition: Lloyd–Max quantizers of the density of one coordinate of a
// uniformly random unit vector in R^d, f(x) ∝ (1 − x²)^((d−3)/2) on [−1, 1],
// solved here from scratch by numerical integration; plus the Hadamard rotation
// against the dense matrix it stands for.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kv/hadamard.h"
#include "kv/turbo_codebook.h"
#include "kv_test_util.h"

namespace nextn {
namespace {

// Integrals of f and x·f over [a, b] by composite Simpson (f unnormalized).
struct BetaDensity {
  double m;  // exponent (d − 3)/2
  double f(double x) const { return std::pow(std::max(0.0, 1.0 - x * x), m); }
  template <class G>
  double simpson(G g, double a, double b, int n = 4000) const {
    double h = (b - a) / n, s = g(a) + g(b);
    for (int i = 1; i < n; ++i) s += g(a + i * h) * (i % 2 ? 4 : 2);
    return s * h / 3;
  }
  double mass(double a, double b) const { return simpson([&](double x) { return f(x); }, a, b); }
  double mean_mass(double a, double b) const { return simpson([&](double x) { return x * f(x); }, a, b); }
};

// Positive half of the symmetric Lloyd–Max quantizer with 2^bits levels.
std::vector<double> solve_lloyd_max(int d, int bits, double* d_mse) {
  BetaDensity dens{(d - 3) / 2.0};
  const int half = 1 << (bits - 1);
  std::vector<double> c(half);
  for (int i = 0; i < half; ++i) c[i] = (0.5 + 2.0 * i / half) / std::sqrt(double(d));
  const double upper = std::min(1.0, 12.0 / std::sqrt(double(d)));  // mass beyond is < 1e-30
  for (int it = 0; it < 5000; ++it) {
    std::vector<double> b(half + 1);
    b[0] = 0;
    for (int i = 1; i < half; ++i) b[i] = 0.5 * (c[i - 1] + c[i]);
    b[half] = upper;
    double change = 0;
    for (int i = 0; i < half; ++i) {
      double nc = dens.mean_mass(b[i], b[i + 1]) / dens.mass(b[i], b[i + 1]);
      change = std::max(change, std::abs(nc - c[i]));
      c[i] = nc;
    }
    if (change < 1e-13) break;
  }
  // d · MSE per coordinate.
  double total = 2 * dens.mass(0, upper), err = 0;
  for (int i = 0; i < half; ++i) {
    double a = i == 0 ? 0 : 0.5 * (c[i - 1] + c[i]), b = i + 1 < half ? 0.5 * (c[i] + c[i + 1]) : upper;
    err += 2 * dens.simpson([&](double x) { return (x - c[i]) * (x - c[i]) * dens.f(x); }, a, b);
  }
  *d_mse = err / total * d;
  return c;
}

TEST(TurboCodebook, MatchesLloydMaxOfTheRotatedCoordinateDensity) {
  // Paper (Thm 1 discussion): d·MSE ≈ 0.117, 0.03, 0.009 for b = 2, 3, 4.
  const double expected_dmse[] = {0, 0, 0.1160, 0.0340, 0.00931};
  for (int d : {64, 128}) {
    for (int bits : {2, 3, 4}) {
      double dmse = 0;
      std::vector<double> solved = solve_lloyd_max(d, bits, &dmse);
      const TurboCodebook& cb = turbo_codebook(bits, d);
      ASSERT_EQ(cb.size, 1 << bits);
      const int half = cb.size / 2;
      for (int i = 0; i < half; ++i) {
        SCOPED_TRACE(testing::Message() << "d=" << d << " bits=" << bits << " i=" << i);
        EXPECT_NEAR(cb.centroids[half + i], solved[i], 2e-6);
        EXPECT_NEAR(cb.centroids[half - 1 - i], -solved[i], 2e-6);  // symmetric
      }
      for (int i = 0; i + 1 < cb.size; ++i)
        EXPECT_NEAR(cb.boundaries[i], 0.5 * (cb.centroids[i] + cb.centroids[i + 1]), 1e-7);
      EXPECT_NEAR(dmse, expected_dmse[bits], 0.03 * expected_dmse[bits] + 0.002) << "d=" << d << " bits=" << bits;
    }
  }
}

TEST(TurboCodebook, ApproachesGaussianLloydMaxAtD128) {
  // Max (1960) unit-variance 3-bit centroids, scaled by 1/√128: the Beta table is close.
  const double gauss[] = {0.2451, 0.7560, 1.3439, 2.1519};
  const TurboCodebook& cb = turbo_codebook(3, 128);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(cb.centroids[4 + i], gauss[i] / std::sqrt(128.0), 0.01 * gauss[i]);
}

TEST(TurboCodebook, QuantizeIsNearestCentroid) {
  for (int bits : {3, 4}) {
    const TurboCodebook& cb = turbo_codebook(bits, 128);
    for (int s = 0; s < 2000; ++s) {
      float y = -0.4f + 0.8f * s / 1999.0f;
      int best = 0;
      for (int i = 1; i < cb.size; ++i)
        if (std::abs(y - cb.centroids[i]) < std::abs(y - cb.centroids[best])) best = i;
      EXPECT_EQ(cb.quantize(y), best) << y;
    }
  }
}

TEST(Hadamard, EqualsTheDenseSignedSylvesterMatrix) {
  for (int n : {64, 128}) {
    RandomizedHadamard rot(n);
    // Column j of the transform = forward(e_j); compare with D2·H·D1/√n built from H's definition.
    std::vector<float> e(n);
    std::vector<float> s1(n), s2(n);
    // Recover the signs: forward(e_0)[i] = s2_i · s1_0 / √n (H[i][0] = 1).
    std::fill(e.begin(), e.end(), 0.f);
    e[0] = 1;
    rot.forward(e.data());
    for (int i = 0; i < n; ++i) s2[i] = e[i] > 0 ? 1.f : -1.f;  // up to the global sign s1_0
    for (int j = 0; j < n; ++j) {
      std::fill(e.begin(), e.end(), 0.f);
      e[j] = 1;
      rot.forward(e.data());
      const double s1j = e[0] * s2[0] > 0 ? 1 : -1;  // H[0][j] = 1
      for (int i = 0; i < n; ++i) {
        const int hij = (__builtin_popcount(i & j) % 2) ? -1 : 1;  // Sylvester H[i][j]
        EXPECT_NEAR(e[i], s2[i] * hij * s1j / std::sqrt(double(n)), 1e-6) << n << " " << i << " " << j;
      }
    }
    // Orthonormal: inverse(forward(x)) = x, inner products preserved.
    auto x = testing_kv::random_floats(n, 1), y = testing_kv::random_floats(n, 2);
    auto rx = x, ry = y;
    rot.forward(rx.data());
    rot.forward(ry.data());
    double dot = 0, rdot = 0;
    for (int i = 0; i < n; ++i) dot += double(x[i]) * y[i], rdot += double(rx[i]) * ry[i];
    EXPECT_NEAR(rdot, dot, 1e-4 * (1 + std::abs(dot)));
    rot.inverse(rx.data());
    for (int i = 0; i < n; ++i) EXPECT_NEAR(rx[i], x[i], 1e-5);
  }
}

}  // namespace
}  // namespace nextn
