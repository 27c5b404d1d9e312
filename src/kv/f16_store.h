// kv/f16_store.h — whether Highway's F32 -> F16 DemoteTo may be used to store F16.
// Highway 1.0 rounds to nearest even only where the CPU converts natively (x86 F16C,
// which nextn's AVX2 and AVX-512 targets have; Arm NEON and SVE). On SSE4 and
// the scalar targets it emulates the conversion by truncation, one F16 step (5e-4
// relative) away from the value every other target stores; there the F16 stores take
// the scalar round-to-nearest path (util/dtype.h f32_to_f16) so that all targets agree.
// Evaluated per target inside Highway's foreach_target passes.
#pragma once

#define NEXTN_F16_DEMOTE_ROUNDS \
  (HWY_ARCH_X86 ? (HWY_TARGET <= HWY_AVX2) : (HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128))
