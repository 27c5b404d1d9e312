// bench/server_process.cc — see server_process.h.
#include "bench/server_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <sstream>

#include "util/error.h"
#include "util/process_memory.h"
#include "util/timer.h"

namespace nextn::bench {

MemorySample sample_memory(pid_t pid) {
  ProcessMemory m = read_process_memory(pid);
  MemorySample s;
  s.rss_mb = double(m.rss) / (1024.0 * 1024.0);
  s.peak_rss_mb = double(m.peak_rss) / (1024.0 * 1024.0);
  return s;
}

void MemorySampler::sample() {
  std::lock_guard<std::mutex> lock(mutex_);
  MemorySample s = sample_memory(pid_);
  if (s.rss_mb <= 0) return;
  last_rss_ = s.rss_mb;
  if (s.rss_mb > max_rss_) max_rss_ = s.rss_mb;
  if (s.peak_rss_mb > hwm_) hwm_ = s.peak_rss_mb;
}

MemorySampler::MemorySampler(pid_t pid) : pid_(pid) {
  sample();
  thread_ = std::thread([this] {
    while (!stop_) {
      sample();
      for (int i = 0; i < 5 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

MemorySampler::~MemorySampler() {
  stop_ = true;
  thread_.join();
}

MemorySample MemorySampler::peak() {
  sample();
  return {max_rss_.load(), hwm_.load()};
}
MemorySample MemorySampler::last() {
  sample();
  return {last_rss_.load(), hwm_.load()};
}

ServerProcess::ServerProcess(const std::string& binary, int port, const std::vector<std::string>& args,
                             const std::string& log_path)
    : port_(port), log_path_(log_path) {
  std::vector<std::string> argv_s = {binary, "serve", "--port", std::to_string(port)};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log_fd < 0) fail(ErrorKind::kBadInput, "cannot write server log {}", log_path);
  {
    std::string cmd;
    for (auto& a : argv_s) cmd += a + " ";
    cmd += "\n";
    (void)!write(log_fd, cmd.data(), cmd.size());
  }
  pid_ = fork();
  if (pid_ < 0) fail(ErrorKind::kResource, "fork failed");
  if (pid_ == 0) {
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    std::perror("execv");
    _exit(127);
  }
  close(log_fd);
}

ServerProcess::~ServerProcess() { stop(); }

bool ServerProcess::alive() {
  if (reaped_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  reaped_ = true;
  if (r == pid_) {
    if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) term_signal_ = WTERMSIG(status);
  }
  return false;
}

std::string ServerProcess::exit_description() const {
  if (term_signal_ == SIGKILL) return "killed by signal 9 (out of memory?)";
  if (term_signal_) return "killed by signal " + std::to_string(term_signal_);
  return "exited with code " + std::to_string(exit_code_);
}

bool ServerProcess::wait_healthy(double timeout_s, bool progress) {
  const char spinner[] = "|/-\\";
  Stopwatch watch;
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(2);
  client.set_read_timeout(2);
  for (int tick = 0; watch.seconds() < timeout_s; ++tick) {
    if (!alive()) {
      if (progress) std::fprintf(stderr, "\r  server %s\n", exit_description().c_str());
      return false;
    }
    auto res = client.Get("/health");
    if (res && res->status == 200) {
      if (progress) std::fprintf(stderr, "\r  Model loaded in %.1fs          \n", watch.seconds());
      return true;
    }
    if (progress) std::fprintf(stderr, "\r  %c Waiting for model to load... %.0fs", spinner[tick % 4], watch.seconds());
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (progress) std::fprintf(stderr, "\r  server not healthy after %.0fs\n", timeout_s);
  return false;
}

void ServerProcess::stop() {
  if (pid_ <= 0 || !alive()) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100 && alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (alive()) {
    kill(pid_, SIGKILL);
    while (alive()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string ServerProcess::log_tail(int lines) const {
  std::ifstream in(log_path_);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::ostringstream out;
  for (auto& l : tail) out << "    " << l << "\n";
  return out.str();
}

}  // namespace nextn::bench
