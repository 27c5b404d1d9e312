// speculative/adaptive_depth.h — `--num-mtp-tokens auto`: chooses the draft length k for
// each step to maximise expected tokens per second. Expected tokens of a step with
// k drafts: 1 + sum_{i<=k} prod_{j<=i} a_j, where a_j is the running conditional
// acceptance at draft position j (decayed counts with a prior); its cost: k times
// the measured cost of one draft row plus the measured cost of a target forward of
// k+1 rows. The neighbours of the current choice are probed now and then so their
// acceptance and cost stay measured: 8 steps after the choice changes, then ever less
// often while it holds (the interval doubling, or quadrupling while no deeper draft
// could win even fully accepted, up to every 128 steps). A probe costs a step at a worse
// depth; rare probes keep a policy that settles on k = 0 within a few per cent of plain
// decoding, and a choice made on a disturbed measurement is soon revisited.
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

class AdaptiveDepth {
 public:
  explicit AdaptiveDepth(int max_k);
  int choose(const VerifyCostModel& costs);
  // One step: k drafted, `accepted` accepted, drafting took draft_seconds.
  void record(int k, int accepted, double draft_seconds);
  double acceptance(int pos) const;  // conditional, 0-based position

 private:
  // Whether a depth above `best` could beat `best_rate` (tokens per second) with every
  // draft accepted, at the measured costs.
  bool deeper_could_win(const VerifyCostModel& costs, int best, double best_rate, double draft) const;

  int max_k_;
  int last_best_ = -1;       // the choice the probe interval counts from
  int probe_interval_ = 0;   // steps between probes (kProbeEvery .. kProbeEveryMax)
  int since_probe_ = 0;
  int probes_ = 0;
  std::vector<double> reached_, accepted_;
  double draft_cost_ = -1.0;  // seconds per drafted token
  int draft_samples_ = 0;
};

}  // namespace nextn
