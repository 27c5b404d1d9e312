// bench/report.h — benchmark output: the mtp_bench summary table (plus Accept and
// Mean-len columns) on stdout, a markdown report, a JSON file with every raw
// measurement, and an SVG bar chart of TPS per configuration and context.
#pragma once
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/machine.h"
#include "bench/measurement.h"

namespace nextn::bench {

struct Report {
  std::string model;
  std::string command;  // the command line that produced it
  MachineInfo machine;
  std::vector<Measurement> measurements;
  std::vector<Summary> summaries;
  nlohmann::json warmups = nlohmann::json::array();  // per configuration: the warm-up request's usage
};

std::string format_console_table(const Report& report);
std::string format_markdown(const Report& report);
std::string format_json(const Report& report, const BenchOptions& options);
std::string format_svg(const Report& report);

}  // namespace nextn::bench
