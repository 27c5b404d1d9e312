// speculative/cost_model.h — what a speculative step costs on this machine, for the
// depth planner: the target forward of r rows over b sequences (all sequences' verify
// rows together) and a draft pass over b sequences. Both are measured: the forward at
// start-up (Speculator::calibrate) and after every step, the draft passes on every
// drafting step; estimates are running averages, so they follow a machine whose speed
// drifts.
#pragma once
#include <cstddef>
#include <vector>

namespace nextn {

// Forward cost per number of rows, for forwards over one number of sequences.
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
  // The start-up measurement of `rows` rows. It stands for the size until a step of that
  // size is measured, scaled by the drift: how steps of calibrated sizes compare with
  // their start-up measurement (the machine's speed moves; on a shared host by tens of
  // per cent within minutes).
  void calibrate(int rows, double seconds, double distinct_experts = -1.0);
  // Measured (smoothed) cost, interpolated or extrapolated where not measured yet.
  double cost(int rows) const;
  // The measured row count nearest to `rows` (the lower one on a tie), or -1: none.
  int nearest_measured(int rows) const;
  bool measured(int rows) const { return at(rows) >= 0; }
  // Whether measurements lie below and above `rows` (cost() then interpolates).
  bool brackets(int rows) const;
  // The distinct experts per routed layer expected for a forward of `rows` rows
  // (rows itself for a dense model).
  double work(int rows) const;

 private:
  void grow(int rows);
  // The estimate at exactly `rows` rows (< 0: none): steps measured there, else the
  // start-up measurement times the drift.
  double at(int rows) const;

  std::vector<double> ema_;         // index rows; steps' running average, <0 none
  std::vector<double> calibrated_;  // index rows; start-up measurement, <0 none
  std::vector<double> experts_;     // index rows; measured distinct experts per routed layer, <0 unmeasured
  std::vector<int> samples_;        // index rows; steps recorded
  double drift_ = 1.0;              // steps / start-up measurements at the same sizes
  int drift_samples_ = 0;
  int experts_total_ = 0, top_k_ = 0;
};

// The target forward's cost by number of sequences b and rows r. Sequences cost apart
// from their rows (each brings its own attention and recurrent state), so a curve over
// rows is kept for each b. Where b's own curve has no measurement on both sides of r,
// the single-sequence curve (measured at start-up) gives the shape and b's nearest
// measurement the offset (b's per-sequence cost); a b never measured takes the offset of
// the nearest measured b, scaled by its number of extra sequences.
class ForwardCostModel {
 public:
  ForwardCostModel(int max_sequences, int max_rows);
  void set_routing(int experts, int top_k);
  void record(int sequences, int rows, double seconds, double distinct_experts = -1.0);
  void calibrate(int sequences, int rows, double seconds, double distinct_experts = -1.0);
  double cost(int sequences, int rows) const;

 private:
  const VerifyCostModel& curve(int sequences) const;
  VerifyCostModel& curve_of(int sequences);  // grown to hold `sequences`
  // b's extra cost over the single-sequence curve at its measurement nearest `rows`
  // (false: b has none).
  bool offset(int sequences, int rows, double& out) const;

  std::vector<VerifyCostModel> curves_;  // index sequences (0 unused)
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
