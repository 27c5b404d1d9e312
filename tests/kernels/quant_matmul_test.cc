// tests/kernels/quant_matmul_test.cc — matmul on block-quantized weights (every
// format, every SIMD target this machine supports) against a float64 reference on the
// dequantized weights, with the bound that int8 activation rounding implies; and the
// bitwise independence of a row's result from its batch, batch size and threads.
// (Dequantization itself is checked against tests/reference/ggml_quants.py by
// tests/io/test_gguf_dequantize.py, and MLX's through whole models against
// tests/reference/mlx_affine.py by tests/model/test_mlx_models.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "matmul_each_check.h"
#include "kernels/weight_format.h"
#include "util/dtype.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace nextn {
namespace {

const DType kQuantTypes[] = {DType::kQ8_0,    DType::kQ4_0,    DType::kQ4_1,     DType::kQ5_0,   DType::kQ5_1,
                             DType::kQ4_K,    DType::kQ5_K,    DType::kQ6_K,     DType::kMlx4G32, DType::kMlx4G64,
                             DType::kMlx4G128, DType::kMlx8G32, DType::kMlx8G64, DType::kMlx8G128};

bool is_mlx(DType t) { return t >= DType::kMlx4G32; }

// Byte offsets of the float fields of one block (fp16, or f32 for MLX); the rest of a
// block is free bits.
std::vector<int> scale_fields(DType t) {
  if (is_mlx(t)) return {0, 4};
  switch (t) {
    case DType::kQ8_0: case DType::kQ4_0: case DType::kQ5_0: return {0};
    case DType::kQ6_K: return {208};
    default: return {0, 2};
  }
}

struct QuantWeights {
  DType dtype;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // dequantized
  WeightMatrix matrix() const { return {dtype, rows, cols, bytes.data()}; }
};

// Random blocks: every bit pattern of the quants and scales, fp16 fields of either sign.
QuantWeights random_blocks(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  const DTypeInfo& info = dtype_info(dtype);
  QuantWeights w{dtype, rows, cols, std::vector<uint8_t>(dtype_row_bytes(dtype, cols) * rows), {}};
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (auto& b : w.bytes) b = static_cast<uint8_t>(byte(rng));
  const int64_t n_blocks = rows * cols / info.block_elems;
  for (int64_t b = 0; b < n_blocks; ++b)
    for (int off : scale_fields(dtype)) {
      const float v = scale(rng);
      const uint16_t h = f32_to_f16(v);
      if (is_mlx(dtype)) std::memcpy(w.bytes.data() + b * info.block_bytes + off, &v, 4);
      else std::memcpy(w.bytes.data() + b * info.block_bytes + off, &h, 2);
    }
  std::vector<float> deq(rows * cols);
  weight_format(dtype)->dequantize(w.bytes.data(), rows * cols, deq.data());
  w.values.assign(deq.begin(), deq.end());
  return w;
}

std::vector<float> random_vector(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// |y − Σ w·x| ≤ Σ_i |w_i|·s_b/2 (rounding x_i to s_b·q_i, s_b = amax_b/127 of its block)
// plus float32 rounding of the per-block products and sums.
void expect_close(const QuantWeights& w, const std::vector<float>& x, int64_t n_rows, const std::vector<float>& y,
                  const float* bias, const std::string& what) {
  const int64_t blocks = w.cols / 32;
  for (int64_t r = 0; r < n_rows; ++r) {
    std::vector<double> step(blocks);
    for (int64_t b = 0; b < blocks; ++b) {
      double amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[r * w.cols + b * 32 + i]));
      step[b] = amax / 127.0;
    }
    for (int64_t o = 0; o < w.rows; ++o) {
      double sum = bias ? bias[o] : 0.0, rounding = 0, mag = bias ? std::fabs(bias[o]) : 0.0;
      for (int64_t i = 0; i < w.cols; ++i) {
        const double wi = w.values[o * w.cols + i], xi = x[r * w.cols + i];
        sum += wi * xi;
        rounding += std::fabs(wi) * step[i / 32] / 2;
        mag += std::fabs(wi) * (std::fabs(xi) + step[i / 32]);
      }
      const double bound = rounding * 1.001 + std::ldexp(1.0, -22) * static_cast<double>(blocks + 32) * mag + 1e-30;
      ASSERT_NEAR(y[r * w.rows + o], sum, bound) << what << " row " << r << " out " << o;
    }
  }
}

class QuantMatmulTargets : public ::testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_F(QuantMatmulTargets, MatchesReferenceForEveryFormatShapeAndTarget) {
  std::mt19937 rng(4321);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (DType dtype : kQuantTypes) {
      const int64_t unit = dtype_info(dtype).block_elems;
      for (int64_t cols : {unit, 2 * unit, unit == 32 ? int64_t{608} : int64_t{512}})
        for (int64_t outs : {1, 3, 7, 18}) {
          QuantWeights w = random_blocks(dtype, outs, cols, rng);
          std::vector<float> bias = random_vector(outs, rng);
          for (int64_t n_rows : {1, 2, 3, 5, 8, 9, 17}) {
            std::vector<float> x = random_vector(n_rows * cols, rng);
            for (bool with_bias : {false, true}) {
              std::vector<float> y(n_rows * outs, -1.0f);
              matmul(w.matrix(), x.data(), n_rows, y.data(), with_bias ? bias.data() : nullptr);
              expect_close(w, x, n_rows, y, with_bias ? bias.data() : nullptr,
                           std::string(hwy::TargetName(target)) + " " + dtype_name(dtype) + " cols=" +
                               std::to_string(cols) + " outs=" + std::to_string(outs) + " rows=" +
                               std::to_string(n_rows));
            }
          }
        }
    }
  }
}

TEST(QuantMatmul, QuantizedWeightsOfRealValuesMatchReference) {
  std::mt19937 rng(5);
  ThreadPool::set_global_threads(2);
  for (DType dtype : kQuantTypes) {
    const int64_t rows = 37, cols = 768;
    std::vector<float> src = random_vector(rows * cols, rng);
    QuantWeights w{dtype, rows, cols, std::vector<uint8_t>(dtype_row_bytes(dtype, cols) * rows), {}};
    weight_format(dtype)->quantize(src.data(), rows * cols, w.bytes.data());
    std::vector<float> deq(rows * cols);
    weight_format(dtype)->dequantize(w.bytes.data(), rows * cols, deq.data());
    w.values.assign(deq.begin(), deq.end());
    for (int64_t n_rows : {1, 4, 40}) {
      std::vector<float> x = random_vector(n_rows * cols, rng);
      std::vector<float> y(n_rows * rows);
      matmul(w.matrix(), x.data(), n_rows, y.data());
      expect_close(w, x, n_rows, y, nullptr, dtype_name(dtype));
    }
  }
  ThreadPool::set_global_threads(0);
}

// The interleaved layouts (kernels/weight_format.h, Interleaving): `w` regrouped.
QuantWeights interleaved(const QuantWeights& w) {
  const Interleaving* layout = interleaving(w.dtype);
  QuantWeights out{layout->layout, w.rows, w.cols, std::vector<uint8_t>(dtype_row_bytes(layout->layout, w.cols) * w.rows),
                   w.values};
  layout->repack(w.bytes.data(), w.rows, w.cols, out.bytes.data());
  return out;
}

const DType kInterleavedFiles[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K};

// Greedy speculative decoding equals plain decoding only if a verify row computes
// exactly what the same row computes alone: check every batch size, offset, thread
// count and target, and single-threaded output ranges (as model/routed_mlp.cc calls them).
void expect_rows_independent(const QuantWeights& w, std::mt19937& rng, const std::string& where) {
  const int64_t n_rows = 40;
  std::vector<float> x = random_vector(n_rows * w.cols, rng);
  std::vector<float> bias = random_vector(w.rows, rng);
  const std::string what = where + " " + dtype_name(w.dtype);
  for (int threads : {1, 2, 3}) {
    ThreadPool::set_global_threads(threads);
    std::vector<float> batched(n_rows * w.rows);
    matmul(w.matrix(), x.data(), n_rows, batched.data(), bias.data());
    for (int64_t k = 1; k <= 9; ++k) {
      std::vector<float> part(k * w.rows);
      matmul(w.matrix(), x.data() + 11 * w.cols, k, part.data(), bias.data());
      ASSERT_EQ(0, std::memcmp(part.data(), batched.data() + 11 * w.rows, part.size() * sizeof(float)))
          << what << " k=" << k << " threads=" << threads;
    }
    std::vector<float> single(w.rows);
    for (int64_t r : {0, 1, 20, 39}) {
      matmul(w.matrix(), x.data() + r * w.cols, 1, single.data(), bias.data());
      ASSERT_EQ(0, std::memcmp(single.data(), batched.data() + r * w.rows, single.size() * sizeof(float)))
          << what << " row " << r << " threads=" << threads;
    }
    std::vector<float> whole(3 * w.rows), ranged(3 * w.rows);
    matmul(w.matrix(), x.data() + 5 * w.cols, 3, whole.data());
    for (int64_t o = 0; o < w.rows; o += 32)
      matmul_outputs(w.matrix(), x.data() + 5 * w.cols, 3, ranged.data(), o, std::min(w.rows, o + 32));
    ASSERT_EQ(0, std::memcmp(whole.data(), ranged.data(), whole.size() * sizeof(float))) << what << " ranges";
  }
}

TEST_F(QuantMatmulTargets, RowsAreBitwiseIndependentOfBatchAndThreads) {
  std::mt19937 rng(8);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (DType dtype : kQuantTypes) expect_rows_independent(random_blocks(dtype, 203, 1024, rng), rng, hwy::TargetName(target));
    for (DType file : kInterleavedFiles)
      expect_rows_independent(interleaved(random_blocks(file, 208, 1024, rng)), rng, hwy::TargetName(target));
  }
  ThreadPool::set_global_threads(0);
}

// matmul_each lays several matrices' outputs end to end over one pool pass: each output
// must be the same bits as its own matmul, whatever the formats (interleaved groups of
// 16 rows beside file layouts with odd row counts), biases, batch and threads; a float
// matrix among them takes the separate path.
TEST_F(QuantMatmulTargets, MatmulEachEqualsSeparateMatmuls) {
  std::mt19937 rng(31);
  const int64_t cols = 1024;
  std::vector<QuantWeights> ws;
  ws.push_back(interleaved(random_blocks(DType::kQ4_K, 208, cols, rng)));
  ws.push_back(random_blocks(DType::kQ6_K, 203, cols, rng));
  ws.push_back(random_blocks(DType::kQ8_0, 5, cols, rng));
  ws.push_back(interleaved(random_blocks(DType::kQ6_K, 32, cols, rng)));
  ws.push_back(random_blocks(DType::kMlx4G64, 40, cols, rng));
  std::vector<float> bias = random_vector(208, rng);
  std::vector<uint16_t> bf16(7 * cols);
  for (auto& v : bf16) v = f32_to_bf16(random_vector(1, rng)[0]);
  const WeightMatrix float_matrix{DType::kBF16, 7, cols, bf16.data()};
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int threads : {1, 2})
      for (int64_t n_rows : {1, 3, 4, 9}) {
        ThreadPool::set_global_threads(threads);
        const std::vector<float> x = random_vector(n_rows * cols, rng);
        for (bool with_float : {false, true}) {
          std::vector<WeightMatrix> matrices;
          for (const QuantWeights& w : ws) matrices.push_back(w.matrix());
          if (with_float) matrices.push_back(float_matrix);
          expect_each_equals_alone(matrices, bias.data(), x, n_rows,
                                   std::string(hwy::TargetName(target)) + " threads=" + std::to_string(threads) +
                                       (with_float ? " with a float matrix" : ""));
        }
      }
  }
  ThreadPool::set_global_threads(0);
}

// The int8 activation blocks every quantized matmul reads, against the rule written out
// here: q = round-half-even(x · (127 / amax)), scale = amax / 127, Σq per 16 values; a
// block with a NaN or an infinity gets a NaN scale, an all-zero block a zero one.
TEST_F(QuantMatmulTargets, ActivationRowsFollowTheRoundingRuleOnEveryTarget) {
  std::mt19937 rng(21);
  const int64_t rows = 3, cols = 8 * 32, stride = quantized_rows_stride(cols);
  std::vector<float> x = random_vector(rows * cols, rng);
  for (int i = 0; i < 32; ++i) x[32 + i] = 0.0f;                              // block 1: zeros
  x[64 + 5] = NAN;                                                            // block 2: a NaN
  x[96 + 7] = -INFINITY;                                                      // block 3: an infinity
  for (int i = 0; i < 32; ++i) x[128 + i] = static_cast<float>(i - 16) / 2;  // block 4: ties at ±x.5
  x[128 + 31] = 127.0f;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<int8_t> q(rows * cols);
    std::vector<float> scale(rows * stride), sum(rows * stride);
    std::vector<int32_t> qsum(2 * rows * stride);
    QuantizedRows out;
    quantize_rows(x.data(), rows, cols, q.data(), scale.data(), sum.data(), qsum.data(), out);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < cols / 32; ++b) {
        const float* xb = x.data() + r * cols + b * 32;
        float amax = 0.0f;
        bool finite = true;
        for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xb[i])), finite = finite && std::isfinite(xb[i]);
        const std::string what = std::string(hwy::TargetName(target)) + " row " + std::to_string(r) + " block " +
                                 std::to_string(b);
        if (!finite) {
          EXPECT_TRUE(std::isnan(scale[r * stride + b])) << what;
          continue;
        }
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        int halves[2] = {0, 0};
        for (int i = 0; i < 32; ++i) {
          const int expected = static_cast<int>(std::nearbyint(xb[i] * inv));  // the default mode: half to even
          ASSERT_EQ(q[r * cols + b * 32 + i], expected) << what << " element " << i;
          halves[i / 16] += expected;
        }
        EXPECT_EQ(scale[r * stride + b], amax / 127.0f) << what;
        EXPECT_EQ(sum[r * stride + b], amax / 127.0f * static_cast<float>(halves[0] + halves[1])) << what;
        EXPECT_EQ(qsum[r * 2 * stride + 2 * b], halves[0]) << what;
        EXPECT_EQ(qsum[r * 2 * stride + 2 * b + 1], halves[1]) << what;
      }
  }
}

TEST(Interleaving, EveryRowReadsBackAsTheFileRow) {
  std::mt19937 rng(12);
  for (DType file : kInterleavedFiles) {
    const QuantWeights w = interleaved(random_blocks(file, 48, 3 * dtype_info(file).block_elems, rng));
    ASSERT_EQ(weight_format(w.dtype)->group_rows, 16) << dtype_name(w.dtype);
    std::vector<float> row(w.cols);
    for (int64_t r = 0; r < w.rows; ++r) {
      matrix_row(w.matrix(), r, row.data());
      for (int64_t i = 0; i < w.cols; ++i)
        ASSERT_EQ(row[i], static_cast<float>(w.values[r * w.cols + i])) << dtype_name(w.dtype) << " row " << r;
    }
  }
}

TEST_F(QuantMatmulTargets, InterleavedLayoutsMatchReferenceOnEveryTarget) {
  std::mt19937 rng(77);
  for (DType file : kInterleavedFiles)
    for (int64_t blocks : {1, 2, 19})
      for (int64_t outs : {16, 48, 112}) {
        const int64_t cols = blocks * dtype_info(file).block_elems;
        const QuantWeights w = interleaved(random_blocks(file, outs, cols, rng));
        std::vector<float> bias = random_vector(outs, rng);
        for (int64_t n_rows : {1, 2, 3, 4, 5, 8, 9, 17}) {
          std::vector<float> x = random_vector(n_rows * cols, rng);
          std::vector<float> first;
          for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
            hwy::SetSupportedTargetsForTest(target);
            const std::string what = std::string(hwy::TargetName(target)) + " " + dtype_name(w.dtype) + " cols=" +
                                     std::to_string(cols) + " outs=" + std::to_string(outs) +
                                     " rows=" + std::to_string(n_rows);
            std::vector<float> y(n_rows * outs, -1.0f);
            matmul(w.matrix(), x.data(), n_rows, y.data(), bias.data());
            expect_close(w, x, n_rows, y, bias.data(), what);
            // Integer dots and the same float steps per output on every target: the same bits.
            if (first.empty()) first = y;
            ASSERT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(float))) << what;
          }
        }
      }
}

TEST(Interleaving, RangesThatCutAGroupAreRefused) {
  std::mt19937 rng(10);
  const QuantWeights w = interleaved(random_blocks(DType::kQ8_0, 32, 64, rng));
  std::vector<float> x = random_vector(64, rng), y(32);
  EXPECT_THROW(matmul_outputs(w.matrix(), x.data(), 1, y.data(), 8, 32), Error);
  EXPECT_THROW(matmul_outputs(w.matrix(), x.data(), 1, y.data(), 0, 24), Error);
}

// quantize → dequantize error per element, bounded from each quantizer's rule
// (fp16 scales may round by 2^-11 relative; nextn rounds K-quant scales up).
double round_trip_bound(DType dtype, const float* x, int64_t i) {
  const double f16 = 1.0 + std::ldexp(1.0, -10);
  auto range = [&](int64_t begin, int64_t n, double& lo, double& hi, double& amax) {
    lo = 1e30, hi = -1e30, amax = 0;
    for (int64_t k = begin; k < begin + n; ++k)
      lo = std::fmin(lo, x[k]), hi = std::fmax(hi, x[k]), amax = std::fmax(amax, std::fabs(x[k]));
  };
  double lo, hi, amax;
  const int64_t b32 = i / 32 * 32, b256 = i / 256 * 256;
  switch (dtype) {
    case DType::kQ8_0: range(b32, 32, lo, hi, amax); return amax / 127 / 2 * f16 + amax * std::ldexp(1.0, -10);
    case DType::kQ4_0: range(b32, 32, lo, hi, amax); return amax / 8 * f16;    // the value opposite max may clamp
    case DType::kQ5_0: range(b32, 32, lo, hi, amax); return amax / 16 * f16;
    case DType::kQ4_1: range(b32, 32, lo, hi, amax); return (hi - lo) / 15 / 2 * f16 + std::fabs(lo) * std::ldexp(1.0, -10);
    case DType::kQ5_1: range(b32, 32, lo, hi, amax); return (hi - lo) / 31 / 2 * f16 + std::fabs(lo) * std::ldexp(1.0, -10);
    case DType::kQ4_K: case DType::kQ5_K: {
      // step_j = d·sc_j ≤ need_j + d, need_j ≤ (hi_j − min(lo_j, 0) + dmin)/levels.
      const double levels = dtype == DType::kQ4_K ? 15 : 31;
      double max_neg = 0, his[8], los[8];
      for (int j = 0; j < 8; ++j) {
        range(b256 + 32 * j, 32, los[j], his[j], amax);
        los[j] = std::fmin(los[j], 0.0);
        max_neg = std::fmax(max_neg, -los[j]);
      }
      const double dmin = max_neg / 63 * f16;
      double max_need = 0;
      for (int j = 0; j < 8; ++j) max_need = std::fmax(max_need, (his[j] - los[j] + dmin) / levels);
      const double d = max_need / 63 * f16;
      const int j = static_cast<int>((i - b256) / 32);
      return ((his[j] - los[j] + dmin) / levels + d) / 2 * f16 + dmin;
    }
    case DType::kQ6_K: {
      double max_need = 0;
      for (int s = 0; s < 16; ++s) {
        range(b256 + 16 * s, 16, lo, hi, amax);
        max_need = std::fmax(max_need, amax / 31);
      }
      range(i / 16 * 16, 16, lo, hi, amax);
      return (amax / 31 + max_need / 127 * f16) / 2 * f16;
    }
    default: break;
  }
  if (is_mlx(dtype)) {
    // MLX's rule: s0 = (hi − lo)/n; the edge of larger magnitude is made exact, which
    // rescales s to edge/round(edge/s0). Inside the range the error is |s|/2; a smaller
    // |s| may leave the far end up to n·(|s0| − |s|) outside it (clamped).
    const DTypeInfo& info = dtype_info(dtype);
    const int group = info.block_elems;
    const double n_levels = (info.block_bytes - 8) * 8 / group == 4 ? 15 : 255;
    range(i / group * group, group, lo, hi, amax);
    const double s0 = std::fmax((hi - lo) / n_levels, 1e-7);
    const double edge = std::fabs(lo) > std::fabs(hi) ? lo : hi;
    const double q0 = std::rint(std::fabs(edge) / s0);
    const double s = q0 != 0 ? std::fabs(edge) / q0 : s0;
    return s / 2 + n_levels * std::fmax(0.0, s0 - s) + 4e-7 * amax;
  }
  return 0;
}

TEST(WeightFormats, RoundTripErrorIsWithinTheQuantizersStep) {
  std::mt19937 rng(3);
  for (DType dtype : kQuantTypes) {
    const int64_t n = 256 * 16;
    std::vector<float> x = random_vector(n, rng);
    for (int64_t i = 0; i < 256; ++i) x[i] = 0.0f;                      // an all-zero block
    for (int64_t i = 256; i < 512; ++i) x[i] = -0.5f;                   // a constant block
    for (int64_t i = 512; i < 768; ++i) x[i] = std::fabs(x[i]) + 1.0f;  // all positive
    for (int64_t i = 768; i < 1024; ++i) x[i] *= 0.1f;                  // small values
    std::vector<uint8_t> blocks(dtype_row_bytes(dtype, n));
    weight_format(dtype)->quantize(x.data(), n, blocks.data());
    std::vector<float> y(n);
    weight_format(dtype)->dequantize(blocks.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i) {
      const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
      ASSERT_LE(err, round_trip_bound(dtype, x.data(), i) + 1e-6 * std::fabs(x[i]) + 1e-12)
          << dtype_name(dtype) << " element " << i << " x=" << x[i] << " y=" << y[i];
    }
  }
}

}  // namespace
}  // namespace nextn
