// tests/kernels/thread_pool_test.cc — parallel_for covers every index exactly once,
// in grain-aligned ranges, across thread counts and many back-to-back jobs.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "util/thread_pool.h"

namespace nextn {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceInGrainAlignedRanges) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (size_t n : {1, 2, 7, 64, 1000, 100003})
      for (size_t grain : {1, 3, 8, 64}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<bool> bad_range{false}, bad_thread{false};
        pool.parallel_for(
            n,
            [&](size_t begin, size_t end, int thread) {
              if (begin % grain != 0 || begin >= end || end > n) bad_range = true;
              if (thread < 0 || thread >= threads) bad_thread = true;
              for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
            },
            grain);
        ASSERT_FALSE(bad_range) << n << " " << grain;
        ASSERT_FALSE(bad_thread);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
      }
  }
}

TEST(ThreadPool, ManyBackToBackJobsEachComplete) {
  ThreadPool pool(2);
  std::vector<long> data(4096);
  for (int job = 0; job < 20000; ++job) {
    pool.parallel_for(data.size(), [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i) data[i] += 1;
    });
  }
  for (long v : data) ASSERT_EQ(v, 20000);
}

}  // namespace
}  // namespace nextn
