// model/delta_rule.h — the gated delta rule of Gated DeltaNet (Highway, run-time
// dispatch): the per-token form, the inner loop of decode and speculative verify, and
// the chunked form that prefill uses. Single-threaded: the caller parallelizes over
// value heads.
#pragma once
#include <cstddef>
#include <vector>

namespace nextn {

// One row of the rule for one value head: q, k [dk], v [dv], α = e^g, β; o [dv] receives
// the row's output (q and o null: the state only, re-applying a logged row).
struct DeltaRow {
  const float* q;
  const float* k;
  const float* v;
  float alpha, beta;
  float* o;
};

// `n` rows one after another, S a [dk, dv] row-major state (row = key index):
//   m = S_inᵀ k,  δ = β (v − α m),  S_out = α S_in + k δᵀ,  o = S_outᵀ q
// which is S ← αS (decay first), S ← S + k (β (v − Sᵀk))ᵀ, o = Sᵀq. The first row reads
// s_in, every row writes s_out (s_out may be s_in), and only s_out's final value counts.
// Run a block of columns at a time through every row, so S is read and written once
// per call however many rows (a verify's rows, or the rows a rollback kept) — and a row
// gives the same bits whether it runs alone or among others.
// With 0 < n_mid < n, the state after row n_mid − 1 goes to s_mid (the
// state after the logged rows a forward re-applies) and the final one to s_out; s_out
// null: the final state is dropped and the rows give their outputs only (a speculative
// verify, whose rows are logged and re-applied by the next forward as far as they were
// accepted). s_mid too may be s_in (a forward re-applying kept rows in place). Either
// way the same bits as separate calls.
void delta_rule_rows(const float* s_in, float* s_mid, int n_mid, float* s_out, const DeltaRow* rows, int n, int dk,
                     int dv);
inline void delta_rule_rows(const float* s_in, float* s_out, const DeltaRow* rows, int n, int dk, int dv) {
  delta_rule_rows(s_in, nullptr, 0, s_out, rows, n, dk, dv);
}

// Work space of chunked_delta_rule (one per thread; grown on first use).
struct DeltaChunkScratch {
  std::vector<float> gamma, tail;  // [chunk]
  std::vector<float> L, qk, T;     // [chunk, chunk]
  std::vector<float> Kt;           // [dk, chunk]
  std::vector<float> Y, UW;        // [chunk, dv + dk]
  std::vector<float> Qs;           // [chunk, dk]
};

// The chunked (parallel) form of the rule over `n` rows for one value head, as matrix
// products (register-tiled, subnormals flushed while it runs), updating S
// in place (exactly the per-token rule in exact arithmetic). q, k and v rows have
// stride qs, β and g entries stride gs, o rows stride os. Within a chunk of `chunk`
// rows with γ_i = Σ_{s≤i} g_s:
//   L_ij = β_i (k_i·k_j) e^{γ_i−γ_j} (j < i);  (I + L) U = β⊙V;  (I + L) W = β⊙e^γ⊙K
//   V' = U − W S;  O_i = e^{γ_i} q_i S + Σ_{j≤i} (q_i·k_j) e^{γ_i−γ_j} V'_j
//   S ← e^{γ_last} S + Σ_j e^{γ_last−γ_j} k_j V'_jᵀ
// Only differences γ_i − γ_j with j ≤ i are exponentiated (no overflow).
void chunked_delta_rule(float* S, const float* q, const float* k, const float* v, size_t qs, const float* beta,
                        const float* g, size_t gs, int n, int chunk, int dk, int dv, float* o, size_t os,
                        DeltaChunkScratch& scratch);

}  // namespace nextn
