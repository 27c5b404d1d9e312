// tests/speculative/spec_test_util.h — a random checkpoint made once by
// tools/make_checkpoint.py under the build's test-tmp, for the drafter gtests.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace nextn::spec_test {

inline std::string checkpoint(const std::string& name, const std::string& args) {
  namespace fs = std::filesystem;
  std::string dir = std::string(NEXTN_BUILD_DIR) + "/test-tmp/spec/" + name;
  if (!fs::exists(dir + "/config.json")) {
    fs::create_directories(dir);
    std::string cmd = "/usr/bin/python3 " + std::string(NEXTN_SOURCE_DIR) + "/tools/make_checkpoint.py " + args +
                      " --quiet --out " + dir;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  return dir;
}

}  // namespace nextn::spec_test
