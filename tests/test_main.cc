// tests/test_main.cc — main() of every GoogleTest binary: as the `nextn` binary does, it
// honours NEXTN_SIMD (e.g. NEXTN_SIMD=AVX2) so that CI runs the numerics tests once per
// SIMD target this machine offers (scripts/test.sh), not only on the best one.
#include <gtest/gtest.h>

#include <cstdio>

#include "kernels/kernels.h"
#include "util/error.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  try {
    nextn::limit_simd_target_from_environment();
  } catch (const nextn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  std::printf("SIMD target: %s\n", nextn::simd_target_name());
  return RUN_ALL_TESTS();
}
