// util/thread_pool.cc — the compute pool behind parallel_for.
//
// A job is cut into a few chunks per thread (aligned to the grain), and every
// thread, the caller included, claims chunks from one atomic word until none is
// left. So a thread the OS has descheduled (the machine may be shared) does not
// stall the step: the others take its chunks. The word packs
// (generation | chunk count | next chunk), so a late worker can never claim a
// chunk of a job other than the one whose description it read.
// Workers spin (yielding now and then) before sleeping, so the many short
// kernels of a decode step launch cheaply.
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

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

constexpr uint64_t kChunkBits = 16;
constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
constexpr size_t kChunksPerThread = 4;

inline uint64_t pack(uint64_t generation, uint64_t total, uint64_t next) {
  return (generation << (2 * kChunkBits)) | (total << kChunkBits) | next;
}
inline uint64_t generation_of(uint64_t s) { return s >> (2 * kChunkBits); }
inline uint64_t total_of(uint64_t s) { return (s >> kChunkBits) & kChunkMask; }
inline uint64_t next_of(uint64_t s) { return s & kChunkMask; }

}  // namespace

struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<uint64_t> state{0};
  std::atomic<uint32_t> done{0};
  std::atomic<int> sleepers{0};
  std::atomic<bool> stop{false};
  // The current job; read by workers only after they saw its generation.
  std::atomic<const RangeFn*> job{nullptr};
  std::atomic<size_t> job_n{0};
  std::atomic<size_t> job_grain{1};
  int n_threads = 1;

  // Claims and runs chunks of job `generation` until none is left.
  void work(uint64_t generation, int thread) {
    const RangeFn* fn = job.load(std::memory_order_relaxed);
    const size_t n = job_n.load(std::memory_order_relaxed);
    const size_t grain = job_grain.load(std::memory_order_relaxed);
    uint64_t s = state.load(std::memory_order_acquire);
    while (generation_of(s) == generation && next_of(s) < total_of(s)) {
      if (!state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      const size_t units = (n + grain - 1) / grain, total = total_of(s), chunk = next_of(s);
      const size_t begin = std::min(n, chunk * units / total * grain);
      const size_t end = std::min(n, (chunk + 1) * units / total * grain);
      if (begin < end) (*fn)(begin, end, thread);
      done.fetch_add(1, std::memory_order_acq_rel);
      s = state.load(std::memory_order_acquire);
    }
  }

  void worker_loop(int thread) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t generation = generation_of(state.load(std::memory_order_acquire));
      for (int spin = 0; generation == seen && spin < 20000; ++spin) {
        if (stop.load(std::memory_order_relaxed)) return;
        if ((spin & 255) == 255) {
          std::this_thread::yield();
        } else {
          cpu_relax();
        }
        generation = generation_of(state.load(std::memory_order_acquire));
      }
      if (generation == seen) {
        std::unique_lock<std::mutex> lock(mutex);
        sleepers.fetch_add(1);
        wake.wait(lock, [&] { return stop.load() || generation_of(state.load()) != seen; });
        sleepers.fetch_sub(1);
        generation = generation_of(state.load(std::memory_order_acquire));
      }
      if (stop.load()) return;
      seen = generation;
      work(generation, thread);
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
  const size_t units = (n + grain - 1) / grain;
  if (n_threads_ == 1 || units <= 1) {
    fn(0, n, 0);
    return;
  }
  // One job at a time: kernels are called from the engine thread only.
  static std::mutex submit_mutex;
  std::lock_guard<std::mutex> submit(submit_mutex);
  const size_t total = std::min<size_t>({units, kChunksPerThread * n_threads_, kChunkMask});
  impl_->job.store(&fn, std::memory_order_relaxed);
  impl_->job_n.store(n, std::memory_order_relaxed);
  impl_->job_grain.store(grain, std::memory_order_relaxed);
  impl_->done.store(0, std::memory_order_relaxed);
  const uint64_t generation = generation_of(impl_->state.load(std::memory_order_relaxed)) + 1;
  impl_->state.store(pack(generation, total, 0));  // seq_cst: ordered against `sleepers` below
  if (impl_->sleepers.load() > 0) {
    { std::lock_guard<std::mutex> lock(impl_->mutex); }
    impl_->wake.notify_all();
  }
  impl_->work(generation, 0);
  for (int spin = 0; impl_->done.load(std::memory_order_acquire) < total; ++spin) {
    if ((spin & 255) == 255) {
      std::this_thread::yield();
    } else {
      cpu_relax();
    }
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
