// kernels/cpu_extras.h — CPU instructions that Highway 1.0.3's targets do not enable, used
// by kernels that test for them at run time. Each one is offered as a pseudo-target of
// NEXTN_SIMD just above the Highway target it extends, so tests can run with and without it:
//   AVX2_VNNI  AVX2 + AVX-VNNI (the 256-bit VEX vpdpbusd; Intel Alder Lake and later, AMD
//              Zen 5): the interleaved quantized tiles (interleaved-inl.h).
//   AVX3_ZEN4  AVX3_DL + AVX512_BF16 (vdpbf16ps) on AMD Zen 4 and later: BF16-weight
//              matmuls with bf16 activations (matmul.cc). Highway 1.1 and later name this
//              target AVX3_ZEN4 too; Intel's CPUs with AVX512_BF16 are left out (there it
//              measured slower than float32 FMA, docs/performance.md, "Kernels").
#pragma once

namespace nextn {

// Whether the AVX2 code may use AVX-VNNI: the CPU has it and NEXTN_SIMD (limit_simd_target)
// did not ask for plain "AVX2".
bool avx_vnni();

// Whether the AVX3_DL code may use AVX512_BF16: the CPU has it and NEXTN_SIMD did not ask
// for plain "AVX3_DL".
bool avx512_bf16();

// The name of a Highway target with its extra when that is in use ("AVX2" → "AVX2_VNNI").
const char* extend_target_name(const char* highway_name);

// Intel AMX (Sapphire Rapids and later Xeons): 1 KiB tile registers multiplied by
// TDPBUSD (int8) and TDPBF16PS (bf16). A process may only use them after asking Linux
// for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM). nextn has no AMX kernels yet:
// this is what `nextn perf` reports, so a figure says what the machine could have done.
struct AmxSupport {
  bool tile = false, int8 = false, bf16 = false;  // CPUID leaf 7.0 EDX bits 24, 25, 22
  bool linux_offers_tile_data = false;            // ARCH_GET_XCOMP_SUPP has XTILEDATA (18)
};
AmxSupport amx_support();

}  // namespace nextn
