// kernels/bandwidth.cc — measures the machine's streaming memory read bandwidth
// with the same thread pool and SIMD loads the kernels use.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/kernels.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace nextn {

double measure_read_bandwidth_gbs(size_t bytes, int repeats) {
  const size_t n = std::max<size_t>(bytes / sizeof(float), 1 << 16);
  std::unique_ptr<float[]> buffer(new float[n]);
  ThreadPool& pool = ThreadPool::global();
  const size_t grain = 4096;  // 16 KiB chunks: page aligned per thread
  // First touch from the threads that will read (NUMA placement, no lazy zero pages).
  pool.parallel_for(
      n, [&](size_t begin, size_t end, int) { std::fill(buffer.get() + begin, buffer.get() + end, 1.0f); }, grain);
  std::vector<float> sums(static_cast<size_t>(pool.size()), 0.0f);
  double best = 0;
  for (int rep = 0; rep < std::max(1, repeats); ++rep) {
    Stopwatch watch;
    pool.parallel_for(
        n, [&](size_t begin, size_t end, int t) { sums[t] += stream_sum(buffer.get() + begin, end - begin); },
        grain);
    best = std::max(best, static_cast<double>(n * sizeof(float)) / watch.seconds() / 1e9);
  }
  float total = 0;
  for (float s : sums) total += s;
  if (total < 0) std::abort();  // keeps the reads observable; never true
  return best;
}

}  // namespace nextn
