// tests/kernels/cpu_features_test.cc — what kernels/cpu_extras.h reads off the CPU,
// against the Linux kernel's own reading of it (/proc/cpuinfo's flags).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "kernels/cpu_extras.h"

namespace nextn {
namespace {

std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> flags;
      for (std::string w; words >> w;) flags.insert(w);
      return flags;
    }
  return {};
}

TEST(CpuFeatures, AmxBitsMatchTheKernelsFlags) {
  const auto flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags line (not Linux x86)";
  const AmxSupport amx = amx_support();
  EXPECT_EQ(amx.tile, flags.count("amx_tile") == 1);
  EXPECT_EQ(amx.int8, flags.count("amx_int8") == 1);
  EXPECT_EQ(amx.bf16, flags.count("amx_bf16") == 1);
  // Linux lists amx_tile only when it manages the tile state, which is when it offers it.
  if (amx.tile) {
    EXPECT_EQ(amx.linux_offers_tile_data, flags.count("amx_tile") == 1);
  }
}

}  // namespace
}  // namespace nextn
