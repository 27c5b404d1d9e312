// util/process_memory.h — resident and peak resident memory of a process, read from
// /proc/PID/status (the one /proc memory reader: the server's /metrics and log line,
// and the benchmark's sampler of a child server).
#pragma once
#include <sys/types.h>

#include <cstddef>

namespace nextn {

struct ProcessMemory {
  size_t rss = 0;       // VmRSS, bytes
  size_t peak_rss = 0;  // VmHWM (the kernel's peak), bytes
};

// Zeros when the process is gone (or /proc is not mounted).
ProcessMemory read_process_memory(pid_t pid);
// This process.
ProcessMemory process_memory();

}  // namespace nextn
