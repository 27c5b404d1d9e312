// model/routed_mlp.h — the MLP of a decoder layer as its MlpSpec describes it: dense
// (a gated MLP) or routed (Mixture of Experts: router, top-k, routed experts, shared
// expert, in every family's variant). One implementation for every architecture; a
// family only says where its tensors live (RoutedNames) and fills the MlpSpec.
//
// Routed execution groups the rows of a batch (prefill, verify, several sequences) by
// expert: each chosen expert's matrices are read once per forward over all the rows
// that chose it, however many rows there are. The pool is split over (expert, block of
// output rows) items: one dispatch for every gate/up projection of the layer, one for
// every down projection.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/decoder_block.h"
#include "model/routed_stats.h"
#include "model/weights.h"

namespace nextn {

// One unit of pool work in a routed forward: output rows [o0, o1) of *w for the m
// gathered rows of one expert (x: its input rows, y: its output rows, contiguous).
struct ExpertWorkItem {
  const WeightMatrix* w;
  const float* x;
  float* y;
  int32_t m;
  int64_t o0, o1;
};

// The routed part of one layer: router, experts, shared expert (and its gate).
class RoutedExperts {
 public:
  RoutedExperts(const MlpSpec& spec, int hidden, WeightStore& store, const std::string& prefix,
                const RoutedNames& names);

  // out [n_rows, H] = Σ_{e chosen for row r} w_{r,e} · expert_e(x[r]) + shared(x[r]).
  // router_in [n_rows, H] is what the router scores (the same rows as x for Qwen and
  // GLM; Gemma 4 scores a differently normed copy).
  void forward(const float* router_in, const float* x, int n_rows, float* out);

  // What this layer's forwards have routed so far.
  const RoutedStats& stats() const { return stats_; }

  // Bytes of one routed expert's matrices (what each chosen expert streams).
  size_t expert_bytes() const { return expert_bytes_; }
  // Bytes read every row whatever the routing: router and shared expert.
  size_t always_bytes() const { return always_bytes_; }

 private:
  struct Expert {
    WeightMatrix gate_up;  // fused: [2I, H] slice of gate_up_proj; else unused (rows 0)
    WeightMatrix gate, up;  // separate tensors: [I, H] each
    WeightMatrix down;      // [H, I]
  };
  void route(const float* router_in, int n_rows);

  MlpSpec spec_;
  int hidden_;
  WeightMatrix router_;                   // [E, H], F32
  const float* correction_bias_ = nullptr;  // [E] or null
  const float* per_expert_scale_ = nullptr;  // [E] or null
  std::vector<Expert> experts_;
  Expert shared_;
  WeightMatrix shared_gate_;              // [1, H] or rows 0
  size_t expert_bytes_ = 0, always_bytes_ = 0;

  // Per-forward scratch (no allocation in steady state).
  std::vector<float> logits_;          // [n, E]
  std::vector<int32_t> chosen_;        // [n, top_k] expert of each (row, slot)
  std::vector<float> weight_;          // [n, top_k] its weight
  std::vector<int32_t> expert_rows_;   // rows grouped by expert: CSR over experts
  std::vector<float> expert_weights_;  // the same order
  std::vector<int32_t> expert_start_;  // [E + 1]
  std::vector<float> xe_, h1_, h2_, ye_, gate_logit_;
  std::vector<int32_t> order_, fill_;  // route(): experts by score, next free slot per expert
  std::vector<float> choice_;          // route(): score (+ correction bias) of each expert
  std::vector<ExpertWorkItem> items_;  // one pass of (expert, output block) work
  RoutedStats stats_;                  // what forward() has routed so far
};


// One layer's MLP with its pre-norm and residual: x += MLP(RMSNorm(x; `norm`)), dense
// or routed (then config.routed_names under `prefix`). norm is prefix + "post_attention_layernorm.weight".
class FeedForward {
 public:
  FeedForward(const ModelConfig& config, const LayerSpec& layer, WeightStore& store, const std::string& prefix);
  void forward(float* x, int n_rows, BlockScratch& s);
  // Adds what the routed part has done to `into` (nothing for a dense layer).
  void add_routed_stats(RoutedStats& into) const;

 private:
  int hidden_, intermediate_;
  float eps_;
  MlpWeights dense_;                        // dense layers
  std::unique_ptr<RoutedExperts> routed_;   // routed layers (norm in dense_.norm)
};

// Expert MLP activations: out = act(gate) ⊙ up, act = silu or gelu_tanh.
void gated_activation(bool gelu, const float* gate, const float* up, int64_t n, float* out);

}  // namespace nextn
