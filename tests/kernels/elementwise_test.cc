// tests/kernels/elementwise_test.cc — RMSNorm, RoPE, SwiGLU, GeGLU, soft-cap, softmax, convert_row,
// argmax and stream_sum against float64 scalar references, odd lengths, every SIMD target.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "util/dtype.h"
#include "util/thread_pool.h"

namespace nextn {
namespace {

std::vector<float> random_vector(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

class EveryTarget : public ::testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
  static std::vector<int64_t> targets() { return hwy::SupportedAndGeneratedTargets(); }
};

TEST_F(EveryTarget, RmsNormMatchesReference) {
  std::mt19937 rng(1);
  for (int64_t target : targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {1, 3, 17, 64, 1000, 1027})
      for (int64_t rows : {1, 5, 40}) {
        auto x = random_vector(rows * n, rng, 3.0f);
        auto w = random_vector(n, rng);
        std::vector<float> out(rows * n);
        rms_norm(x.data(), w.data(), rows, n, 1e-6f, out.data());
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
          double inv = 1.0 / std::sqrt(ss / n + 1e-6);
          for (int64_t i = 0; i < n; ++i) {
            double ref = x[r * n + i] * inv * w[i];
            ASSERT_NEAR(out[r * n + i], ref, 1e-5 * (std::fabs(ref) + 1e-3)) << hwy::TargetName(target);
          }
        }
        // In place gives the same result.
        rms_norm(x.data(), w.data(), rows, n, 1e-6f, x.data());
        ASSERT_EQ(0, std::memcmp(x.data(), out.data(), out.size() * sizeof(float)));
      }
  }
}

// A gated activation out = act(gate) · up on every target against its float64 form
// `ref(g, u)` within `bound(g, u, ref)`: random gates of spread `scale` and, from 5
// elements on, the gates -200, 200, 0 and `fourth`; then in place (out aliasing gate).
template <typename Kernel, typename Ref, typename Bound>
void check_gated(const std::vector<int64_t>& targets, Kernel kernel, std::mt19937& rng, float scale, float fourth,
                 Ref ref, Bound bound) {
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {1, 15, 16, 33, 100000}) {
      auto g = random_vector(n, rng, scale);
      auto u = random_vector(n, rng);
      if (n > 4) {
        g[0] = -200.0f;
        g[1] = 200.0f;
        g[2] = 0.0f;
        g[3] = fourth;
      }
      std::vector<float> out(n);
      kernel(g.data(), u.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i) {
        const double want = ref(double(g[i]), double(u[i]));
        ASSERT_TRUE(std::isfinite(out[i])) << i;
        ASSERT_NEAR(out[i], want, bound(double(g[i]), double(u[i]), want))
            << hwy::TargetName(target) << " i=" << i << " g=" << g[i];
      }
      kernel(g.data(), u.data(), n, g.data());  // aliasing out == gate
      ASSERT_EQ(0, std::memcmp(g.data(), out.data(), n * sizeof(float)));
    }
  }
}

TEST_F(EveryTarget, SwigluMatchesReferenceIncludingExtremes) {
  std::mt19937 rng(2);
  check_gated(
      targets(), swiglu, rng, 4.0f, -90.0f, [](double g, double u) { return g / (1.0 + std::exp(-g)) * u; },
      [](double, double, double ref) { return 2e-6 * std::fabs(ref) + 1e-30; });
}

// The short causal conv of Gated DeltaNet then SiLU, against float64 over the same
// float inputs: channel counts that leave a scalar tail, one row (decode) and many
// (prefill, split over the pool), extreme sums (silu(−200) = 0, silu(200) = 200).
TEST_F(EveryTarget, ConvSiluMatchesReference) {
  std::mt19937 rng(12);
  for (int64_t target : targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t channels : {1, 17, 6144})
      for (int64_t n : {1, 4, 9}) {
        const int taps = 4;
        auto x = random_vector((n + taps - 1) * channels, rng, 2.0f);
        auto w = random_vector(taps * channels, rng);
        if (channels > 1) {  // channel 0 of the last row: a huge negative sum; channel 1: huge positive
          for (int j = 0; j < taps; ++j) {
            w[j * channels] = 1.0f, x[(n - 1 + j) * channels] = -50.0f;
            w[j * channels + 1] = 1.0f, x[(n - 1 + j) * channels + 1] = 50.0f;
          }
        }
        std::vector<float> y(n * channels);
        conv_silu(x.data(), w.data(), n, channels, taps, y.data());
        for (int64_t t = 0; t < n; ++t)
          for (int64_t c = 0; c < channels; ++c) {
            double acc = 0;
            for (int j = 0; j < taps; ++j) acc += double(w[j * channels + c]) * x[(t + j) * channels + c];
            const double want = acc / (1.0 + std::exp(-acc));
            // float sums of 4 products (relative to their magnitudes), then the activation's 2e-6
            double mag = 0;
            for (int j = 0; j < taps; ++j) mag += std::fabs(double(w[j * channels + c]) * x[(t + j) * channels + c]);
            ASSERT_NEAR(y[t * channels + c], want, 4 * 6e-8 * mag * 1.1 + 2e-6 * std::fabs(want) + 1e-30)
                << hwy::TargetName(target) << " t=" << t << " c=" << c;
          }
      }
  }
}

TEST_F(EveryTarget, GegluMatchesReferenceIncludingExtremes) {
  std::mt19937 rng(7);
  check_gated(
      targets(), geglu, rng, 6.0f, -3e6f,  // g³ beyond float32's range
      [](double x, double u) {
        return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u;
      },
      // float32's tanh is a few ulp of 1 off where it saturates: 1 + tanh then loses
      // those ulp against |x/2 · u|, whatever the SIMD target (std::tanh alike).
      [](double x, double u, double ref) { return 2e-6 * std::fabs(ref) + 1e-6 * std::fabs(0.5 * x * u) + 1e-30; });
}

TEST_F(EveryTarget, SoftcapMatchesReference) {
  std::mt19937 rng(8);
  for (int64_t target : targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {1, 15, 16, 33, 262144}) {
      auto x = random_vector(n, rng, 100.0f);
      if (n > 3) x[0] = 1e30f, x[1] = -1e30f, x[2] = 0.0f;
      const std::vector<float> in = x;
      softcap(x.data(), n, 30.0f);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = 30.0 * std::tanh(double(in[i]) / 30.0);
        ASSERT_NEAR(x[i], ref, 2e-6 * std::fabs(ref) + 1e-30) << hwy::TargetName(target) << " x=" << in[i];
      }
    }
  }
}

TEST_F(EveryTarget, SoftmaxMatchesReference) {
  std::mt19937 rng(3);
  for (int64_t target : targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {1, 2, 7, 16, 151937}) {
      auto x = random_vector(n, rng, 10.0f);
      x[0] = 1000.0f;  // large values must not overflow
      std::vector<double> ref(n);
      double m = -1e300, s = 0;
      for (float v : x) m = std::max(m, double(v));
      for (int64_t i = 0; i < n; ++i) s += ref[i] = std::exp(x[i] - m);
      softmax(x.data(), n);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(x[i], ref[i] / s, 1e-6 * ref[i] / s + 1e-30) << hwy::TargetName(target);
        total += x[i];
      }
      ASSERT_NEAR(total, 1.0, 1e-5);
    }
  }
}

TEST_F(EveryTarget, ConvertRowIsExact) {
  std::mt19937 rng(4);
  for (int64_t target : targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {1, 9, 64, 1001}) {
      auto v = random_vector(n, rng, 5.0f);
      std::vector<uint16_t> h(n), b(n);
      for (int64_t i = 0; i < n; ++i) {
        h[i] = f32_to_f16(v[i]);
        b[i] = f32_to_bf16(v[i]);
      }
      std::vector<float> out(n);
      convert_row(DType::kF32, v.data(), n, out.data());
      ASSERT_EQ(0, std::memcmp(out.data(), v.data(), n * sizeof(float)));
      convert_row(DType::kF16, h.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], f16_to_f32(h[i]));
      convert_row(DType::kBF16, b.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], bf16_to_f32(b[i]));
    }
  }
}

// The first index of the largest value, read one value at a time; NaN skipped.
int64_t first_largest(const std::vector<float>& x) {
  int64_t best = -1;
  for (int64_t i = 0; i < int64_t(x.size()); ++i)
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  return best < 0 || x[best] == -std::numeric_limits<float>::infinity() ? 0 : best;
}

TEST_F(EveryTarget, ArgmaxIsTheFirstLargestValue) {
  std::mt19937 rng(6);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t target : targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {1, 2, 15, 16, 17, 33, 1000, 248320}) {
      auto x = random_vector(n, rng);
      ASSERT_EQ(argmax(x.data(), n), first_largest(x)) << hwy::TargetName(target) << " n=" << n;
      // Ties: the largest value at several places, in different lanes and in the tail.
      std::uniform_int_distribution<int64_t> at(0, n - 1);
      const float top = 9.0f;
      for (int k = 0; k < 3; ++k) x[size_t(at(rng))] = top;
      x[size_t(n - 1)] = top;
      ASSERT_EQ(argmax(x.data(), n), first_largest(x)) << hwy::TargetName(target) << " n=" << n;
      // NaN anywhere (the first value included) is never the answer.
      x[0] = nan;
      x[size_t(at(rng))] = nan;
      ASSERT_EQ(argmax(x.data(), n), first_largest(x)) << hwy::TargetName(target) << " n=" << n;
    }
    // Integers in a narrow range: many ties of the largest value.
    std::vector<float> ties(4099);
    std::uniform_int_distribution<int> small(0, 7);
    for (float& v : ties) v = float(small(rng));
    ASSERT_EQ(argmax(ties.data(), int64_t(ties.size())), first_largest(ties));
    // Nothing above −∞, or nothing but NaN: index 0.
    std::vector<float> low(40, -inf), nans(40, nan);
    EXPECT_EQ(argmax(low.data(), 40), 0);
    EXPECT_EQ(argmax(nans.data(), 40), 0);
    low[37] = -1e30f;
    EXPECT_EQ(argmax(low.data(), 40), 37);
  }
  EXPECT_EQ(argmax(nullptr, 0), 0);
}

TEST_F(EveryTarget, StreamSumMatchesReference) {
  std::mt19937 rng(5);
  for (int64_t target : targets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int64_t n : {0, 1, 63, 64, 100003}) {
      auto v = random_vector(n, rng);
      double ref = 0, mag = 0;
      for (float x : v) ref += x, mag += std::fabs(x);
      ASSERT_NEAR(stream_sum(v.data(), n), ref, 1e-5 * mag + 1e-6);
    }
  }
}

TEST(Rope, MatchesRotateHalfReference) {
  std::mt19937 rng(6);
  const int64_t heads = 3, head_dim = 64, rows = 70;
  std::vector<float> inv_freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) inv_freq[i] = float(1.0 / std::pow(1e6, 2.0 * i / head_dim));
  std::vector<int32_t> positions(rows);
  for (int64_t r = 0; r < rows; ++r) positions[r] = int32_t(r * 37 + 5);
  for (int threads : {1, 2}) {
    ThreadPool::set_global_threads(threads);
    auto x = random_vector(rows * heads * head_dim, rng);
    auto y = x;
    rope(y.data(), rows, heads, head_dim, positions.data(), inv_freq.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < head_dim; ++i) {
          const float* a = x.data() + (r * heads + h) * head_dim;
          int64_t j = i % (head_dim / 2);
          double ang = double(positions[r]) * inv_freq[j];
          double rotated = i < head_dim / 2 ? -double(a[i + head_dim / 2]) : double(a[i - head_dim / 2]);
          double ref = a[i] * std::cos(ang) + rotated * std::sin(ang);
          ASSERT_NEAR(y[(r * heads + h) * head_dim + i], ref, 1e-5) << r << " " << h << " " << i;
        }
  }
  ThreadPool::set_global_threads(0);
}

// rope keeps the last two angle tables computed on this thread: calls alternating three
// (positions, frequencies) pairs (so tables are evicted and reused), two of them sharing
// positions and two sharing frequencies, each against angles computed here. A stale table
// would be off by a whole rotation, far beyond the tolerance.
TEST(Rope, ReusedAnglesFollowPositionsAndFrequencies) {
  std::mt19937 rng(9);
  const int64_t heads = 2, head_dim = 32, half = head_dim / 2;
  std::vector<float> slow(half), fast(half);
  for (int64_t i = 0; i < half; ++i) {
    slow[i] = float(1.0 / std::pow(1e6, 2.0 * i / head_dim));
    fast[i] = float(1.0 / std::pow(1e4, 2.0 * i / head_dim));
  }
  const std::vector<int32_t> at_a = {3, 4, 5}, at_b = {3, 4, 6};
  const std::pair<const std::vector<int32_t>*, const std::vector<float>*> calls[] = {
      {&at_a, &slow}, {&at_b, &slow}, {&at_a, &fast}, {&at_a, &slow}, {&at_b, &slow}, {&at_b, &fast}, {&at_a, &fast}};
  for (const auto& [positions, inv_freq] : calls) {
    const int64_t rows = static_cast<int64_t>(positions->size());
    auto x = random_vector(rows * heads * head_dim, rng);
    auto y = x;
    rope(y.data(), rows, heads, head_dim, positions->data(), inv_freq->data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double angle = double((*positions)[r]) * double((*inv_freq)[i]);
          const float c = float(std::cos(angle)), s = float(std::sin(angle));
          const float* a = x.data() + (r * heads + h) * head_dim;
          const float* out = y.data() + (r * heads + h) * head_dim;
          // float32 products, perhaps fused: within a few units of the last place.
          const float tol = 1e-6f * (std::fabs(a[i]) + std::fabs(a[i + half]));
          ASSERT_NEAR(out[i], a[i] * c - a[i + half] * s, tol) << "row " << r << " dim " << i;
          ASSERT_NEAR(out[i + half], a[i + half] * c + a[i] * s, tol) << "row " << r << " dim " << i;
        }
  }
}

}  // namespace
}  // namespace nextn
