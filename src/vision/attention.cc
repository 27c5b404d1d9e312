// vision/attention.cc — image_attention (see attention.h).
#include "vision/attention.h"

#include <algorithm>
#include <vector>

#include "kernels/kernels.h"
#include "util/thread_pool.h"

namespace nextn::vision {

void image_attention(const float* q, int64_t q_stride, const float* k, int64_t k_stride, const float* v,
                     int64_t v_stride, int64_t P, int64_t heads, int64_t d, float scale, float* out) {
  constexpr int64_t kQueryBlock = 256;
  std::vector<float> q_h(size_t(P * d)), k_h(size_t(P * d)), v_t(size_t(d * P)), o_h(size_t(kQueryBlock * d));
  std::vector<float> scores(size_t(std::min(kQueryBlock, P) * P));
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t i = 0; i < P; ++i) {
      const float* qr = q + size_t(i * q_stride + head * d);
      const float* kr = k + size_t(i * k_stride + head * d);
      const float* vr = v + size_t(i * v_stride + head * d);
      std::copy(qr, qr + d, q_h.data() + size_t(i * d));
      std::copy(kr, kr + d, k_h.data() + size_t(i * d));
      for (int64_t e = 0; e < d; ++e) v_t[size_t(e * P + i)] = vr[e];
    }
    const WeightMatrix keys{DType::kF32, P, d, k_h.data()}, values{DType::kF32, d, P, v_t.data()};
    for (int64_t q0 = 0; q0 < P; q0 += kQueryBlock) {
      const int64_t nq = std::min(kQueryBlock, P - q0);
      matmul(keys, q_h.data() + size_t(q0 * d), nq, scores.data());
      parallel_for(size_t(nq), [&](size_t begin, size_t end, int) {
        for (size_t r = begin; r < end; ++r) {
          float* sr = scores.data() + r * size_t(P);
          if (scale != 1.0f)
            for (int64_t j = 0; j < P; ++j) sr[j] *= scale;
          softmax(sr, P);
        }
      });
      matmul(values, scores.data(), nq, o_h.data());
      for (int64_t r = 0; r < nq; ++r)
        std::copy(o_h.data() + size_t(r * d), o_h.data() + size_t((r + 1) * d),
                  out + size_t((q0 + r) * heads * d + head * d));
    }
  }
}

}  // namespace nextn::vision
