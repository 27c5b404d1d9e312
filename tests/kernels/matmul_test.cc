// tests/kernels/matmul_test.cc — matmul against a float64 scalar reference for
// every weight dtype, odd shapes, 1..17 rows, bias on/off, on every SIMD target
// this machine supports (BF16 weights with bf16-rounded activations where the target
// uses the bf16 dot product); plus the bitwise row-independence the verifier relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "matmul_each_check.h"
#include "util/dtype.h"
#include "util/thread_pool.h"

namespace nextn {
namespace {

struct TestWeights {
  DType dtype;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // exact stored values, for the reference
  WeightMatrix matrix() const { return {dtype, rows, cols, bytes.data()}; }
};

TestWeights make_weights(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  TestWeights w{dtype, rows, cols, std::vector<uint8_t>(rows * cols * dtype_size(dtype)), {}};
  w.values.resize(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    float v = dist(rng);
    if (dtype == DType::kF32) {
      std::memcpy(w.bytes.data() + 4 * i, &v, 4);
      w.values[i] = v;
    } else {
      uint16_t h = dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
      w.values[i] = dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return w;
}

std::vector<float> random_vector(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The activation the kernel multiplies: x itself, or x rounded to bf16 where BF16 weights
// take the bf16 dot product (bf16_activations()).
double activation(DType dtype, float x) {
  return dtype == DType::kBF16 && bf16_activations() ? bf16_to_f32(f32_to_bf16(x)) : x;
}

// Checks y against the float64 reference; tolerance scales with sum |w·x|.
void expect_matches_reference(const TestWeights& w, const std::vector<float>& x, int64_t n_rows,
                              const std::vector<float>& y, const float* bias, const std::string& what) {
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < w.rows; ++o) {
      double sum = 0, mag = 0;
      for (int64_t i = 0; i < w.cols; ++i) {
        double p = w.values[o * w.cols + i] * activation(w.dtype, x[r * w.cols + i]);
        sum += p;
        mag += std::fabs(p);
      }
      if (bias) {
        sum += bias[o];
        mag += std::fabs(bias[o]);
      }
      ASSERT_NEAR(y[r * w.rows + o], sum, 1e-5 * mag + 1e-6) << what << " row " << r << " out " << o;
    }
}

class MatmulTargets : public ::testing::Test {
 protected:
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_F(MatmulTargets, MatchesReferenceForEveryDtypeShapeAndTarget) {
  std::mt19937 rng(1234);
  const DType dtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  const int64_t col_sizes[] = {1, 7, 31, 32, 33, 64, 100, 257};
  const int64_t out_sizes[] = {1, 5, 13, 67};
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (DType dtype : dtypes)
      for (int64_t cols : col_sizes)
        for (int64_t outs : out_sizes) {
          TestWeights w = make_weights(dtype, outs, cols, rng);
          std::vector<float> bias = random_vector(outs, rng);
          for (int64_t n_rows : {1, 2, 3, 4, 5, 8, 9, 16, 17}) {
            std::vector<float> x = random_vector(n_rows * cols, rng);
            for (bool with_bias : {false, true}) {
              std::vector<float> y(n_rows * outs, -1.0f);
              matmul(w.matrix(), x.data(), n_rows, y.data(), with_bias ? bias.data() : nullptr);
              std::string what = std::string(simd_target_name()) + " " + dtype_name(dtype) +
                                 " cols=" + std::to_string(cols) + " outs=" + std::to_string(outs) +
                                 " rows=" + std::to_string(n_rows) + (with_bias ? " bias" : "");
              expect_matches_reference(w, x, n_rows, y, with_bias ? bias.data() : nullptr, what);
            }
          }
        }
  }
}

TEST(Matmul, LargeMultiThreadedBatchesMatchReference) {
  std::mt19937 rng(99);
  ThreadPool::set_global_threads(2);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    TestWeights w = make_weights(dtype, 203, 1030, rng);
    for (int64_t n_rows : {1, 7, 300}) {
      std::vector<float> x = random_vector(n_rows * w.cols, rng);
      std::vector<float> y(n_rows * w.rows);
      matmul(w.matrix(), x.data(), n_rows, y.data());
      expect_matches_reference(w, x, n_rows, y, nullptr, dtype_name(dtype));
    }
  }
  ThreadPool::set_global_threads(0);
}

// A row's result must not depend on its batch mates, the batch size or the
// thread count: verification must reproduce plain decoding bit for bit.
TEST(Matmul, RowsAreBitwiseIndependentOfBatchAndThreads) {
  std::mt19937 rng(7);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    TestWeights w = make_weights(dtype, 517, 1024 + 3, rng);
    const int64_t n_rows = 300;
    std::vector<float> x = random_vector(n_rows * w.cols, rng);
    std::vector<float> bias = random_vector(w.rows, rng);
    for (int threads : {1, 2, 3}) {
      ThreadPool::set_global_threads(threads);
      std::vector<float> batched(n_rows * w.rows);
      matmul(w.matrix(), x.data(), n_rows, batched.data(), bias.data());
      for (int64_t k : {1, 2, 3, 4, 5, 8, 16, 17}) {
        std::vector<float> part(k * w.rows);
        matmul(w.matrix(), x.data() + 11 * w.cols, k, part.data(), bias.data());
        ASSERT_EQ(0, std::memcmp(part.data(), batched.data() + 11 * w.rows, part.size() * sizeof(float)))
            << dtype_name(dtype) << " k=" << k << " threads=" << threads;
      }
      std::vector<float> single(w.rows);
      for (int64_t r : {0, 1, 150, 299}) {
        matmul(w.matrix(), x.data() + r * w.cols, 1, single.data(), bias.data());
        ASSERT_EQ(0, std::memcmp(single.data(), batched.data() + r * w.rows, single.size() * sizeof(float)))
            << dtype_name(dtype) << " row " << r << " threads=" << threads;
      }
    }
  }
  ThreadPool::set_global_threads(0);
}

// matmul_each over float matrices of one type lays their outputs end to end over one pool
// pass with the activations prepared once: each output the same bits as its own matmul,
// on every target, for widths with and without a scalar tail, 1 and 2 threads; a mix of
// types takes the separate path.
TEST_F(MatmulTargets, MatmulEachEqualsSeparateMatmuls) {
  std::mt19937 rng(77);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
      for (int64_t cols : {100, 1024}) {
        std::vector<TestWeights> ws;
        for (int64_t rows : {203, 24, 5, 64}) ws.push_back(make_weights(dtype, rows, cols, rng));
        ws.push_back(make_weights(dtype == DType::kF32 ? DType::kBF16 : DType::kF32, 40, cols, rng));
        const std::vector<float> bias = random_vector(203, rng);
        for (int threads : {1, 2})
          for (int64_t n_rows : {1, 3, 9})
            for (size_t count : {ws.size() - 1, ws.size()}) {  // one type; then with another
              ThreadPool::set_global_threads(threads);
              const std::vector<float> x = random_vector(n_rows * cols, rng);
              std::vector<WeightMatrix> matrices;
              for (size_t m = 0; m < count; ++m) matrices.push_back(ws[m].matrix());
              expect_each_equals_alone(matrices, bias.data(), x, n_rows,
                                       std::string(simd_target_name()) + " cols=" + std::to_string(cols) +
                                           " threads=" + std::to_string(threads));
            }
      }
  }
  ThreadPool::set_global_threads(0);
}

TEST(Matmul, ReportsASimdTarget) { EXPECT_STRNE("", simd_target_name()); }

}  // namespace
}  // namespace nextn
