// bench/server_process.h — a `nextn serve` child process owned by the benchmark:
// started with a configuration's flags, its output sent to a log file, health
// polled with a progress spinner, memory sampled from /proc, stopped by PID.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nextn::bench {

struct MemorySample {
  double rss_mb = 0;       // VmRSS
  double peak_rss_mb = 0;  // VmHWM (kernel-tracked peak)
};

// The memory of process pid in MiB (util/process_memory.h); zeros when it is gone.
MemorySample sample_memory(pid_t pid);

// Samples a process's memory every 0.5 s in a background thread, keeping the peak.
class MemorySampler {
 public:
  explicit MemorySampler(pid_t pid);
  ~MemorySampler();
  // Both read /proc once more themselves, so a request shorter than the sampling period
  // still reports real figures.
  MemorySample peak();  // max RSS seen and the kernel's peak
  MemorySample last();

 private:
  void sample();  // one /proc read (serialized: the thread and the callers both sample)
  std::mutex mutex_;

  pid_t pid_;
  std::atomic<bool> stop_{false};
  std::atomic<double> max_rss_{0}, hwm_{0}, last_rss_{0};
  std::thread thread_;
};

class ServerProcess {
 public:
  // Starts `binary serve --port P args...` with stdout+stderr appended to log_path.
  ServerProcess(const std::string& binary, int port, const std::vector<std::string>& args, const std::string& log_path);
  ~ServerProcess();  // stops the process if still running

  pid_t pid() const { return pid_; }
  bool alive();                 // false once it exited (reaps it)
  std::string exit_description() const;  // "exited with code 2", "killed by signal 9 (OOM?)"
  bool killed_by_sigkill() const { return term_signal_ == 9; }
  // Polls GET /health every second until 200, the process dies, or the timeout.
  bool wait_healthy(double timeout_s, bool progress);
  void stop();                  // SIGTERM, then SIGKILL after 10 s
  std::string log_tail(int lines) const;

 private:
  pid_t pid_ = -1;
  int port_;
  std::string log_path_;
  int exit_code_ = -1, term_signal_ = 0;
  bool reaped_ = false;
};

}  // namespace nextn::bench
