// cli/perf_kernels.h — the per-weight-type matmul benchmark of `nextn perf --kernels`.
#pragma once
#include <nlohmann/json.hpp>

namespace nextn {

// Times y = x·Wᵀ for every weight type (and interleaved layout) at 1..32 activation rows
// on the global thread pool; prints a table when `print`, returns the figures as JSON.
nlohmann::json measure_kernels(int repeats, bool print);

}  // namespace nextn
