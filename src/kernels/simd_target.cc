// kernels/simd_target.cc — choosing the SIMD target every Highway-dispatched kernel runs
// on (kernels/ and kv/ share Highway's one chosen target).
#include <strings.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "hwy/highway.h"
#include "kernels/avx_vnni.h"
#include "kernels/kernels.h"
#include "util/error.h"

namespace nextn {

namespace {
constexpr const char* kAvx2Vnni = "AVX2_VNNI";  // Highway's AVX2 target plus AVX-VNNI

// CPUID leaf 7, sub-leaf 1, EAX bit 4 (clang 14 lacks __builtin_cpu_supports("avxvnni")).
// The OS's saving of 256-bit registers is Highway's AVX2 check; AVX2_VNNI is only offered
// beside AVX2. Asked once: the AVX2 tiles read it on every matmul, and CPUID is
// serializing (in a VM, a trap to the hypervisor).
bool cpu_has_avx_vnni() {
  static const bool has = [] {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
#else
    return false;
#endif
  }();
  return has;
}

std::atomic<bool>& vnni_allowed() {
  static std::atomic<bool> allowed{true};
  return allowed;
}

// Highway's targets, with AVX2_VNNI just before AVX2 where the CPU has AVX-VNNI.
std::vector<std::pair<std::string, int64_t>> targets() {
  std::vector<std::pair<std::string, int64_t>> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (t == HWY_AVX2 && cpu_has_avx_vnni()) out.emplace_back(kAvx2Vnni, t);
    out.emplace_back(hwy::TargetName(t), t);
  }
  return out;
}
}  // namespace

bool avx_vnni() { return vnni_allowed().load(std::memory_order_relaxed) && cpu_has_avx_vnni(); }

std::vector<std::string> available_simd_targets() {
  std::vector<std::string> names;
  for (const auto& [name, t] : targets()) names.push_back(name);
  return names;
}

void limit_simd_target(const std::string& name) {
  std::string offered;
  for (const auto& [target_name, t] : targets()) {
    if (strcasecmp(name.c_str(), target_name.c_str()) == 0) {
      // Highway numbers targets best first (lower bit = better): disabling every lower
      // bit leaves `t` as the best one the dispatcher may pick.
      hwy::DisableTargets(t - 1);
      vnni_allowed().store(t != HWY_AVX2 || target_name == kAvx2Vnni);
      return;
    }
    offered += std::string(offered.empty() ? "" : ", ") + target_name;
  }
  fail(ErrorKind::kBadInput, "SIMD target '{}' is not available here (this build and CPU offer: {})", name, offered);
}

void limit_simd_target_from_environment() {
  if (const char* name = std::getenv("NEXTN_SIMD"); name && *name) limit_simd_target(name);
}

}  // namespace nextn
