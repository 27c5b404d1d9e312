// kernels/simd_target.cc — choosing the SIMD target every Highway-dispatched kernel runs
// on (kernels/ and kv/ share Highway's one chosen target).
#include <strings.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "hwy/highway.h"
#include "kernels/kernels.h"
#include "util/error.h"

namespace nextn {

std::vector<std::string> available_simd_targets() {
  std::vector<std::string> names;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) names.push_back(hwy::TargetName(t));
  return names;
}

void limit_simd_target(const std::string& name) {
  std::string offered;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (strcasecmp(name.c_str(), hwy::TargetName(t)) == 0) {
      // Highway numbers targets best first (lower bit = better): disabling every lower
      // bit leaves `t` as the best one the dispatcher may pick.
      hwy::DisableTargets(t - 1);
      return;
    }
    offered += std::string(offered.empty() ? "" : ", ") + hwy::TargetName(t);
  }
  fail(ErrorKind::kBadInput, "SIMD target '{}' is not available here (this build and CPU offer: {})", name, offered);
}

void limit_simd_target_from_environment() {
  if (const char* name = std::getenv("NEXTN_SIMD"); name && *name) limit_simd_target(name);
}

}  // namespace nextn
