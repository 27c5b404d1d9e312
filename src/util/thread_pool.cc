#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace nextn {

struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  std::atomic<bool> stop{false};
  const RangeFn* job = nullptr;
  size_t job_n = 0;
  size_t job_grain = 1;
  int n_threads = 1;

  void run_chunk(int thread) {
    size_t units = (job_n + job_grain - 1) / job_grain;
    size_t per = units / n_threads, extra = units % n_threads;
    size_t begin_unit = thread * per + std::min<size_t>(thread, extra);
    size_t end_unit = begin_unit + per + (static_cast<size_t>(thread) < extra ? 1 : 0);
    size_t begin = std::min(job_n, begin_unit * job_grain);
    size_t end = std::min(job_n, end_unit * job_grain);
    if (begin < end) (*job)(begin, end, thread);
  }

  void worker_loop(int thread) {
    uint64_t seen = 0;
    for (;;) {
      // Spin a little: decode steps launch many short kernels back to back.
      for (int spin = 0; spin < 20000 && generation.load(std::memory_order_acquire) == seen; ++spin) {
        if (stop.load(std::memory_order_relaxed)) return;
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      if (generation.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stop.load() || generation.load() != seen; });
      }
      if (stop.load()) return;
      seen = generation.load(std::memory_order_acquire);
      run_chunk(thread);
      pending.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl), n_threads_(std::max(1, n_threads)) {
  impl_->n_threads = n_threads_;
  for (int t = 1; t < n_threads_; ++t) impl_->workers.emplace_back([this, t] { impl_->worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  for (auto& w : impl_->workers) w.join();
  delete impl_;
}

void ThreadPool::parallel_for(size_t n, const RangeFn& fn, size_t grain) {
  if (n == 0) return;
  grain = std::max<size_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  // One job at a time: kernels are called from the engine thread only.
  static std::mutex submit_mutex;
  std::lock_guard<std::mutex> submit(submit_mutex);
  impl_->job = &fn;
  impl_->job_n = n;
  impl_->job_grain = grain;
  impl_->pending.store(n_threads_ - 1, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->generation.fetch_add(1, std::memory_order_acq_rel);
  }
  impl_->wake.notify_all();
  impl_->run_chunk(0);
  while (impl_->pending.load(std::memory_order_acquire) != 0) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

namespace {
std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
int g_requested_threads = 0;
}  // namespace

int ThreadPool::physical_cores() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, physical_id = "0";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("physical id", 0) == 0) physical_id = line.substr(line.find(':') + 1);
    if (line.rfind("core id", 0) == 0) cores.insert({physical_id, line.substr(line.find(':') + 1)});
  }
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  int n = cores.empty() ? hw : static_cast<int>(cores.size());
  return std::max(1, std::min(n, std::max(1, hw)));
}

void ThreadPool::set_global_threads(int n) {
  g_requested_threads = n;
  global_slot().reset();
}

ThreadPool& ThreadPool::global() {
  auto& pool = global_slot();
  if (!pool) pool = std::make_unique<ThreadPool>(g_requested_threads > 0 ? g_requested_threads : physical_cores());
  return *pool;
}

}  // namespace nextn
