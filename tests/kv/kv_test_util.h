// tests/kv/kv_test_util.h — shared helpers of the compressed-KV tests: random
// data and a float64 causal attention reference.
#pragma once
#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace nextn::testing_kv {

inline std::vector<float> random_floats(size_t n, unsigned seed, float stddev = 1.0f, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// out[r, hq*D + i] for rows r < n at positions pos + r; key/value of token t and
// KV head h come from kv(t, h, k_out, v_out) (D floats each, already as stored).
inline std::vector<double> reference_attention(int n_heads, int n_kv_heads, int D, int pos, int n,
                                               const float* q, float scale,
                                               const std::function<void(int, int, float*, float*)>& kv) {
  const int g = n_heads / n_kv_heads;
  const int len = pos + n;
  std::vector<std::vector<float>> K(static_cast<size_t>(len) * n_kv_heads), V(K.size());
  for (int t = 0; t < len; ++t)
    for (int h = 0; h < n_kv_heads; ++h) {
      auto& k = K[t * n_kv_heads + h];
      auto& v = V[t * n_kv_heads + h];
      k.resize(D);
      v.resize(D);
      kv(t, h, k.data(), v.data());
    }
  std::vector<double> out(static_cast<size_t>(n) * n_heads * D, 0.0);
  for (int r = 0; r < n; ++r)
    for (int hq = 0; hq < n_heads; ++hq) {
      const int h = hq / g;
      const float* qr = q + (static_cast<size_t>(r) * n_heads + hq) * D;
      std::vector<double> s(pos + r + 1);
      double mx = -1e300;
      for (int t = 0; t <= pos + r; ++t) {
        double d = 0;
        for (int i = 0; i < D; ++i) d += double(qr[i]) * K[t * n_kv_heads + h][i];
        s[t] = d * scale;
        mx = std::max(mx, s[t]);
      }
      double z = 0;
      for (double& x : s) z += (x = std::exp(x - mx));
      double* o = out.data() + (static_cast<size_t>(r) * n_heads + hq) * D;
      for (int t = 0; t <= pos + r; ++t)
        for (int i = 0; i < D; ++i) o[i] += s[t] / z * V[t * n_kv_heads + h][i];
    }
  return out;
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - double(b[i])));
  return m;
}

}  // namespace nextn::testing_kv
