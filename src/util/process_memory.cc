// util/process_memory.cc — see process_memory.h.
#include "util/process_memory.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace nextn {

namespace {

ProcessMemory read_status(const char* path) {
  ProcessMemory m;
  FILE* f = std::fopen(path, "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kb = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) m.rss = size_t(kb) * 1024;
    if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1) m.peak_rss = size_t(kb) * 1024;
  }
  std::fclose(f);
  return m;
}

}  // namespace

ProcessMemory read_process_memory(pid_t pid) {
  return read_status(("/proc/" + std::to_string(pid) + "/status").c_str());
}

ProcessMemory process_memory() { return read_status("/proc/self/status"); }

}  // namespace nextn
