// tests/kv/kv_test_util.h — shared helpers of the KV and state tests: random data, the
// value a float-type cache stores, and a float64 causal attention reference (with the
// sliding-window mask when asked).
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kv/kv_cache.h"
#include "util/dtype.h"

namespace nextn::testing_kv {

inline std::vector<float> random_floats(size_t n, unsigned seed, float stddev = 1.0f, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The value a cache of type F32/F16/BF16 stores for x.
inline float stored(KvType type, float x) {
  if (type == KvType::kF16) return f16_to_f32(f32_to_f16(x));
  if (type == KvType::kBF16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

// out[r, hq*D + i] for rows r < n at positions pos + r; key/value of token t and
// KV head h come from kv(t, h, k_out, v_out) (D floats each, already as stored).
// window > 0: row i sees only keys j with i − window < j ≤ i (Gemma's sliding layers).
inline std::vector<double> reference_attention(int n_heads, int n_kv_heads, int D, int pos, int n,
                                               const float* q, double scale,
                                               const std::function<void(int, int, float*, float*)>& kv,
                                               int window = 0) {
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
      const int lo = window > 0 ? std::max(0, pos + r - window + 1) : 0;
      std::vector<double> s(pos + r + 1 - lo);
      double mx = -1e300;
      for (int t = lo; t <= pos + r; ++t) {
        double d = 0;
        for (int i = 0; i < D; ++i) d += double(qr[i]) * K[t * n_kv_heads + h][i];
        s[t - lo] = d * scale;
        mx = std::max(mx, s[t - lo]);
      }
      double z = 0;
      for (double& x : s) z += (x = std::exp(x - mx));
      double* o = out.data() + (static_cast<size_t>(r) * n_heads + hq) * D;
      for (int t = lo; t <= pos + r; ++t)
        for (int i = 0; i < D; ++i) o[i] += s[t - lo] / z * V[t * n_kv_heads + h][i];
    }
  return out;
}

// The same over a cache's own key/value rows, k and v: [len, kv_heads * D] as appended,
// read as a cache of `type` stores them, with the window of `s`.
inline std::vector<double> reference_attention(const KvShape& s, KvType type, const std::vector<float>& k,
                                               const std::vector<float>& v, int pos, int n, const float* q,
                                               double scale) {
  const int D = s.head_dim;
  return reference_attention(
      s.n_heads, s.n_kv_heads, D, pos, n, q, scale,
      [&](int t, int h, float* ko, float* vo) {
        for (int d = 0; d < D; ++d) {
          ko[d] = stored(type, k[(size_t(t) * s.n_kv_heads + h) * D + d]);
          vo[d] = stored(type, v[(size_t(t) * s.n_kv_heads + h) * D + d]);
        }
      },
      s.window);
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - double(b[i])));
  return m;
}

}  // namespace nextn::testing_kv
