// kernels/simd_target.cc — choosing the SIMD target every Highway-dispatched kernel runs
// on (kernels/ and kv/ share Highway's one chosen target).
#include <strings.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hwy/highway.h"
#include "kernels/cpu_extras.h"
#include "kernels/kernels.h"
#include "util/error.h"

namespace nextn {

namespace {

// A pseudo-target (kernels/cpu_extras.h): a Highway target plus one CPUID feature bit.
struct Extra {
  const char* name;
  int64_t base;          // the Highway target it extends
  unsigned leaf7_1_eax;  // its bit in CPUID leaf 7, sub-leaf 1, EAX
  bool amd_only;         // offered on AMD CPUs only
  std::atomic<bool> allowed{true};
};

// AVX3_ZEN4 is AMD's, as in Highway: Zen 4/5 run vdpbf16ps at nearly the FMA rate (32
// multiply-adds each), whereas on an Intel Xeon with AVX512_BF16 it measured half the
// multiply-adds per second of float32 FMA (docs/performance.md, "Kernels").
Extra extras[] = {{"AVX2_VNNI", HWY_AVX2, 1u << 4, false}, {"AVX3_ZEN4", HWY_AVX3_DL, 1u << 5, true}};
Extra& vnni = extras[0];
Extra& bf16 = extras[1];

// Read from CPUID leaf 7.1 (clang 14 lacks __builtin_cpu_supports("avxvnni")). The OS's
// saving of the vector registers is the base target's check: an extra is only offered
// beside its base. Asked once: kernels read it on every matmul, and CPUID is serializing
// (in a VM, a trap to the hypervisor).
bool cpu_has(const Extra& extra) {
  struct Cpu {
    unsigned leaf7_1_eax = 0;
    bool amd = false;
  };
  static const Cpu cpu = [] {
    Cpu c;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, cx = 0, d = 0;
    if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) c.leaf7_1_eax = a;
    // Leaf 0's vendor string "AuthenticAMD" in EBX, EDX, ECX.
    if (__get_cpuid(0, &a, &b, &cx, &d)) c.amd = b == 0x68747541 && d == 0x69746e65 && cx == 0x444d4163;
#endif
    return c;
  }();
  return (cpu.leaf7_1_eax & extra.leaf7_1_eax) != 0 && (cpu.amd || !extra.amd_only);
}

bool usable(const Extra& extra) { return extra.allowed.load(std::memory_order_relaxed) && cpu_has(extra); }

// Highway's targets, each extra just before its base where the CPU has it.
std::vector<std::pair<std::string, int64_t>> targets() {
  std::vector<std::pair<std::string, int64_t>> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    for (const Extra& extra : extras)
      if (t == extra.base && cpu_has(extra)) out.emplace_back(extra.name, t);
    out.emplace_back(hwy::TargetName(t), t);
  }
  return out;
}
}  // namespace

bool avx_vnni() { return usable(vnni); }

AmxSupport amx_support() {
  AmxSupport amx;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    amx.tile = (d >> 24) & 1u;
    amx.int8 = (d >> 25) & 1u;
    amx.bf16 = (d >> 22) & 1u;
  }
#endif
#if defined(__linux__) && defined(__x86_64__)
  // ARCH_GET_XCOMP_SUPP (0x1021): the extended states this kernel can give a process;
  // asking does not change the process (ARCH_REQ_XCOMP_PERM would).
  unsigned long features = 0;
  if (syscall(SYS_arch_prctl, 0x1021, &features) == 0) amx.linux_offers_tile_data = (features >> 18) & 1ul;
#endif
  return amx;
}
bool avx512_bf16() { return usable(bf16); }

const char* extend_target_name(const char* highway_name) {
  for (const Extra& extra : extras)
    if (usable(extra) && std::string_view(highway_name) == hwy::TargetName(extra.base)) return extra.name;
  return highway_name;
}

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
      // Naming a base target itself turns its extra off.
      for (Extra& extra : extras) extra.allowed.store(t != extra.base || target_name == extra.name);
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
