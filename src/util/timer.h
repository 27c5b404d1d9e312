// util/timer.h — monotonic wall-clock helpers.
#pragma once
#include <chrono>

namespace nextn {

inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

class Stopwatch {
 public:
  Stopwatch() : start_(now_seconds()) {}
  double seconds() const { return now_seconds() - start_; }
  double millis() const { return seconds() * 1e3; }
  void reset() { start_ = now_seconds(); }

 private:
  double start_;
};

}  // namespace nextn
