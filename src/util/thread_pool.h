// util/thread_pool.h — the engine's compute threads.
// One global pool sized by --threads (default: physical cores). parallel_for
// splits [0, n) into grain-aligned chunks that every thread (the caller too)
// claims from a shared counter, so fn may run several times on one thread; it
// blocks until all chunks are done. A descheduled thread never stalls a step. Workers spin briefly before sleeping
// so back-to-back kernel launches in a decode step stay cheap.
#pragma once
#include <cstddef>
#include <functional>

namespace nextn {

class ThreadPool {
 public:
  // fn(begin, end, thread_index) over a partition of [0, n).
  using RangeFn = std::function<void(size_t begin, size_t end, int thread)>;

  static ThreadPool& global();
  static void set_global_threads(int n);  // before first use or between steps
  static int physical_cores();

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Splits [0, n) in chunks aligned to `grain` elements.
  void parallel_for(size_t n, const RangeFn& fn, size_t grain = 1);

 private:
  struct Impl;
  Impl* impl_;
  int n_threads_;
};

inline void parallel_for(size_t n, const ThreadPool::RangeFn& fn, size_t grain = 1) {
  ThreadPool::global().parallel_for(n, fn, grain);
}

}  // namespace nextn
