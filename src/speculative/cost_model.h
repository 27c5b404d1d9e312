// speculative/cost_model.h — what a speculative step costs on this machine, for the
// depth planner: the target forward of r rows (all sequences' verify rows together) and a
// draft pass over b sequences. Both are measured: the forward at start-up
// (Speculator::calibrate) and after every step, the draft passes on every drafting step;
// estimates are running averages, so they follow a machine whose speed drifts.
#pragma once
#include <vector>

namespace nextn {

// Forward cost per number of rows, shared by all sequences of an engine.
// Mixture of Experts (set_routing): k verify rows route to up to k x top_k experts, so
// the cost grows with the distinct experts a forward runs, not with its rows. The
// model then interpolates and extrapolates in distinct experts per routed layer (the
// measured count for row counts seen, E(1 - (1 - top_k/E)^rows) scaled to the
// measurements for others) at the measured cost per distinct expert.
class VerifyCostModel {
 public:
  explicit VerifyCostModel(int max_rows);
  // Routed layers with `experts` experts, `top_k` chosen per row (0: a dense model).
  void set_routing(int experts, int top_k);
  // One forward over `rows` rows took `seconds`; `distinct_experts`: the distinct
  // experts it ran per routed layer (MoE only, < 0: not measured).
  void record(int rows, double seconds, double distinct_experts = -1.0);
  // Measured (smoothed) cost, interpolated or extrapolated where not measured yet.
  double cost(int rows) const;
  // The distinct experts per routed layer expected for a forward of `rows` rows
  // (rows itself for a dense model).
  double work(int rows) const;

 private:
  std::vector<double> ema_;      // index rows; <0 unmeasured
  std::vector<double> experts_;  // index rows; measured distinct experts per routed layer, <0 unmeasured
  std::vector<int> samples_;     // index rows; forwards recorded
  int experts_total_ = 0, top_k_ = 0;
};

// What one draft pass over b sequences costs (DraftPasses): the first pass of a step
// (it also catches each sequence's drafter up on the rows accepted last step) and the
// later ones (one row per sequence) apart. Unmeasured batch sizes are interpolated
// between measured ones, above the largest extrapolated at 10 % of its cost per extra
// sequence (a pass streams the drafter's weights once whatever b is: optimistic, so it
// gets tried and measured); later passes not measured yet cost what the first does;
// nothing measured: `fallback` per pass.
class DraftCostModel {
 public:
  void record(int pass, int sequences, double seconds);
  double cost(int pass, int sequences, double fallback) const;

 private:
  std::vector<double> ema_[2];  // [first pass, later passes], index sequences; < 0 unmeasured
  std::vector<int> samples_[2];
};

}  // namespace nextn
