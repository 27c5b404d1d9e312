// bench/machine.h — a description of the machine a benchmark ran on.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace nextn::bench {

struct MachineInfo {
  std::string cpu_model;
  int logical_cpus = 0;
  int physical_cores = 0;
  double memory_gb = 0;
  double read_bandwidth_gbs = 0;  // measured streaming read bandwidth
  std::string simd_target;        // what nextn's kernels dispatch to
  std::string hostname;
  std::string date_utc;
  nlohmann::json to_json() const;
};

MachineInfo describe_machine(int threads);

}  // namespace nextn::bench
