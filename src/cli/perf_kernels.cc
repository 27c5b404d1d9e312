// cli/perf_kernels.cc — `nextn perf --kernels`: the matmul of every weight type on its
// own, y = x·Wᵀ for one matrix and 1..64 activation rows, so that a kernel change can be
// measured per format (the model figures mix every kernel of a forward).
//
// The matrix is random (normal, σ 0.02) and quantized by the format's own quantizer;
// the file formats that the weight store regroups at load (kernels/weight_format.h,
// Interleaving) are measured in both forms, the row-major one and the interleaved one the
// model actually multiplies with. Each figure is the best of `repeats` runs of a loop
// that lasts at least 50 ms.
#include "cli/perf_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/weight_format.h"
#include "util/timer.h"

namespace nextn {

namespace {

constexpr int64_t kOut = 2048, kIn = 4096;
constexpr int kRows[] = {1, 4, 8, 32};

// One matrix in `type`: its bytes and the WeightMatrix over them.
struct TestMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

TestMatrix make_matrix(DType type, const std::vector<float>& values) {
  TestMatrix m;
  m.w = {type, kOut, kIn, nullptr};
  m.bytes.resize(dtype_row_bytes(type, kIn) * kOut);
  if (type == DType::kF32) {
    std::memcpy(m.bytes.data(), values.data(), m.bytes.size());
  } else if (type == DType::kBF16 || type == DType::kF16) {
    auto* out = reinterpret_cast<uint16_t*>(m.bytes.data());
    for (size_t i = 0; i < values.size(); ++i) out[i] = type == DType::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
  } else {
    weight_format(type)->quantize(values.data(), kOut * kIn, m.bytes.data());
  }
  m.w.data = m.bytes.data();
  return m;
}

TestMatrix interleaved(const TestMatrix& file, const Interleaving& layout) {
  TestMatrix m;
  m.w = {layout.layout, kOut, kIn, nullptr};
  m.bytes.resize(dtype_row_bytes(layout.layout, kIn) * kOut);
  layout.repack(file.bytes.data(), kOut, kIn, m.bytes.data());
  m.w.data = m.bytes.data();
  return m;
}

// Microseconds per matmul of `rows` rows: the best of `repeats` loops of ≥ 50 ms.
double time_matmul(const WeightMatrix& w, int rows, int repeats) {
  std::vector<float> x(static_cast<size_t>(rows * kIn)), y(static_cast<size_t>(rows * kOut));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  matmul(w, x.data(), rows, y.data());  // warm the caches and the pool
  double best = 1e30;
  for (int rep = 0; rep < repeats; ++rep) {
    Stopwatch clock;
    int calls = 0;
    do {
      matmul(w, x.data(), rows, y.data());
      ++calls;
    } while (clock.seconds() < 0.05);
    best = std::min(best, clock.seconds() / calls);
  }
  return best * 1e6;
}

}  // namespace

nlohmann::json measure_kernels(int repeats, bool print) {
  const DType types[] = {DType::kF32,  DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,     DType::kQ5_0,
                         DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kMlx4G64, DType::kMlx8G64};
  std::vector<float> values(static_cast<size_t>(kOut * kIn));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (float& v : values) v = dist(rng);

  if (print) {
    fmt::print("\nmatmul y = x·Wᵀ, W {} × {}: µs per call by activation rows (best of {}), GB/s of weights at 1 row\n",
               kOut, kIn, repeats);
    fmt::print("  {:<10}", "type");
    for (int r : kRows) fmt::print(" {:>9}", fmt::format("{} row{}", r, r > 1 ? "s" : ""));
    fmt::print("  {:>7}\n", "GB/s");
  }
  nlohmann::json out = nlohmann::json::array();
  auto measure = [&](const TestMatrix& m) {
    nlohmann::json us = nlohmann::json::object();
    double one_row = 0;
    if (print) fmt::print("  {:<10}", dtype_name(m.w.dtype));
    for (int r : kRows) {
      const double t = time_matmul(m.w, r, repeats);
      if (r == 1) one_row = t;
      us[std::to_string(r)] = t;
      if (print) fmt::print(" {:9.1f}", t);
    }
    const double gbs = static_cast<double>(m.bytes.size()) / (one_row * 1e3);
    if (print) fmt::print("  {:7.1f}\n", gbs);
    out.push_back({{"type", dtype_name(m.w.dtype)}, {"bytes", m.bytes.size()}, {"us_by_rows", us}, {"weight_gbs_1_row", gbs}});
  };
  for (DType type : types) {
    const TestMatrix file = make_matrix(type, values);
    measure(file);
    if (const Interleaving* layout = interleaving(type)) measure(interleaved(file, *layout));
  }
  return out;
}

}  // namespace nextn
