// tests/kernels/matmul_each_check.h — the check shared by the float and quantized
// matmul_each tests: every output of one matmul_each call is the same bits as its
// matrix's own matmul.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "util/dtype.h"

namespace nextn {

// matmul_each over `matrices` (every other one with `bias`, which has as many entries as
// the tallest) against a matmul per matrix, on the rows x [n_rows, cols].
inline void expect_each_equals_alone(const std::vector<WeightMatrix>& matrices, const float* bias,
                                     const std::vector<float>& x, int64_t n_rows, const std::string& what) {
  const size_t count = matrices.size();
  std::vector<std::vector<float>> each(count), alone(count);
  std::vector<MatmulOutput> outputs;
  for (size_t m = 0; m < count; ++m) {
    each[m].assign(n_rows * matrices[m].rows, -1.0f);
    alone[m].assign(n_rows * matrices[m].rows, -2.0f);
    const float* b = m % 2 == 0 ? bias : nullptr;
    outputs.push_back({&matrices[m], each[m].data(), b});
    matmul(matrices[m], x.data(), n_rows, alone[m].data(), b);
  }
  matmul_each(outputs, x.data(), n_rows);
  for (size_t m = 0; m < count; ++m)
    ASSERT_EQ(0, std::memcmp(each[m].data(), alone[m].data(), each[m].size() * sizeof(float)))
        << what << ": matrix " << m << " (" << dtype_name(matrices[m].dtype) << ") of " << count << ", rows=" << n_rows;
}

}  // namespace nextn
