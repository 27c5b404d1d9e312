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

}  // namespace nextn
