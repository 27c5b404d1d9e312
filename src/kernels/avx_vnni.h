// kernels/avx_vnni.h — AVX-VNNI: the byte dot product vpdpbusd in its VEX form on 256-bit
// vectors (Intel Alder Lake and later, AMD Zen 5), which CPUs without AVX-512 may have.
// Highway 1.0.3's AVX2 target does not use it, so the interleaved quantized tiles
// (interleaved-inl.h) choose it at run time: the "AVX2_VNNI" target of NEXTN_SIMD.
#pragma once

namespace nextn {

// Whether the AVX2 code may use AVX-VNNI: the CPU has it and NEXTN_SIMD (limit_simd_target)
// did not ask for plain "AVX2".
bool avx_vnni();

}  // namespace nextn
