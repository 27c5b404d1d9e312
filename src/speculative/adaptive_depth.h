// speculative/adaptive_depth.h — `--num-mtp-tokens auto`: chooses the draft length k for
// each step to maximise expected tokens per second. Expected tokens of a step with
// k drafts: 1 + sum_{i<=k} prod_{j<=i} a_j, where a_j is the running conditional
// acceptance at draft position j (decayed counts with a prior); its cost: k times
// the measured cost of one draft row plus the measured cost of a target forward of
// k+1 rows. Positions beyond the current choice are probed now and then so their
// acceptance stays measured.
#pragma once
#include <vector>

namespace nextn {

// Forward cost per number of rows, shared by all sequences of an engine.
class VerifyCostModel {
 public:
  explicit VerifyCostModel(int max_rows);
  void record(int rows, double seconds);
  // Measured (smoothed) cost, interpolated or extrapolated where not measured yet.
  double cost(int rows) const;

 private:
  std::vector<double> ema_;  // index rows; <0 unmeasured
};

class AdaptiveDepth {
 public:
  explicit AdaptiveDepth(int max_k);
  int choose(const VerifyCostModel& costs);
  // One step: k drafted, `accepted` accepted, drafting took draft_seconds.
  void record(int k, int accepted, double draft_seconds);
  double acceptance(int pos) const;  // conditional, 0-based position

 private:
  int max_k_;
  int steps_ = 0;
  std::vector<double> reached_, accepted_;
  double draft_cost_ = -1.0;  // seconds per drafted token
};

}  // namespace nextn
