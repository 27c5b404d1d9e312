// bench/machine.cc — see machine.h.
#include "bench/machine.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <string>

#include "kernels/kernels.h"
#include "util/thread_pool.h"

namespace nextn::bench {

nlohmann::json MachineInfo::to_json() const {
  return {{"cpu_model", cpu_model},         {"logical_cpus", logical_cpus},
          {"physical_cores", physical_cores}, {"memory_gb", memory_gb},
          {"read_bandwidth_gbs", read_bandwidth_gbs}, {"simd_target", simd_target},
          {"hostname", hostname},           {"date_utc", date_utc}};
}

MachineInfo describe_machine(int threads) {
  MachineInfo m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && m.cpu_model.empty()) m.cpu_model = line.substr(line.find(':') + 2);
  }
  m.logical_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  m.physical_cores = ThreadPool::physical_cores();
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemTotal:", 0) == 0) m.memory_gb = std::stod(line.substr(9)) / (1024.0 * 1024.0);
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  m.hostname = host;
  std::time_t t = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  m.date_utc = date;
  if (threads > 0) ThreadPool::set_global_threads(threads);
  m.read_bandwidth_gbs = measure_read_bandwidth_gbs(size_t(1) << 30, 3);
  m.simd_target = simd_target_name();
  return m;
}

}  // namespace nextn::bench
