// model/rope_table.cc — RoPE frequencies (Hugging Face default, linear and llama3 rules).
#include "model/rope_table.h"

#include <cmath>
#include <vector>

#include "kernels/kernels.h"

namespace nextn {

std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& scaling) {
  const int half = head_dim / 2;
  std::vector<float> out(half);
  const double pi = std::acos(-1.0);
  for (int i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(theta, (2.0 * i) / head_dim);
    if (scaling.type == "linear") {
      f /= scaling.factor;
    } else if (scaling.type == "llama3") {
      const double old_ctx = scaling.original_max_position_embeddings;
      const double low_wavelen = old_ctx / scaling.low_freq_factor;
      const double high_wavelen = old_ctx / scaling.high_freq_factor;
      const double wavelen = 2.0 * pi / f;
      if (wavelen > low_wavelen) {
        f /= scaling.factor;
      } else if (wavelen >= high_wavelen) {
        double smooth = (old_ctx / wavelen - scaling.low_freq_factor) /
                        (scaling.high_freq_factor - scaling.low_freq_factor);
        f = (1.0 - smooth) * f / scaling.factor + smooth * f;
      }
    }
    out[i] = static_cast<float>(f);
  }
  return out;
}

void partial_rope(float* x, int n_rows, int heads, int head_dim, int rotary_dim, const int32_t* positions,
                  const float* inv_freq) {
  const int half = rotary_dim / 2;
  const float* cs = rope_angles(positions, n_rows, inv_freq, half);
  for (int r = 0; r < n_rows; ++r) {
    const float* row_cs = cs + size_t(r) * half * 2;
    for (int h = 0; h < heads; ++h) {
      float* v = x + (size_t(r) * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float c = row_cs[2 * i], s = row_cs[2 * i + 1];
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void partial_mrope(float* x, int n_rows, int heads, int head_dim, int rotary_dim, const int32_t* axes,
                   const float* inv_freq, const int8_t* slot_axis) {
  const int half = rotary_dim / 2;
  std::vector<float> cs(size_t(half) * 2);
  for (int r = 0; r < n_rows; ++r) {
    for (int i = 0; i < half; ++i) {
      const double angle = double(axes[size_t(r) * 3 + size_t(slot_axis[i])]) * double(inv_freq[i]);
      cs[size_t(2 * i)] = float(std::cos(angle));
      cs[size_t(2 * i + 1)] = float(std::sin(angle));
    }
    for (int h = 0; h < heads; ++h) {
      float* v = x + (size_t(r) * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float c = cs[size_t(2 * i)], s = cs[size_t(2 * i + 1)];
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

}  // namespace nextn
