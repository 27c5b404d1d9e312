// model/delta_rule.h — the per-token gated delta rule of Gated DeltaNet (Highway,
// run-time dispatch), the inner loop of decode and speculative verify. Single-threaded:
// the caller parallelizes over value heads.
#pragma once

namespace nextn {

// One token for one value head, S a [dk, dv] row-major state (row = key index):
//   m = S_inᵀ k,  δ = β (v − α m),  S_out = α S_in + k δᵀ,  o = S_outᵀ q
// which is S ← αS (decay first), S ← S + k (β (v − Sᵀk))ᵀ, o = Sᵀq. s_out may be s_in.
void delta_rule_step(const float* s_in, float* s_out, const float* q, const float* k, const float* v, float alpha,
                     float beta, int dk, int dv, float* o);

}  // namespace nextn
