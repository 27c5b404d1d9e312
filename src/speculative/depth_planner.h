// speculative/depth_planner.h — how many drafts each sequence of a batch carries in a
// step (`auto`, the default when no depth is given). Speculation is a scheduling
// decision: the planner picks the depths k_s (0 allowed: a plain decode row) that
// maximise the batch's expected tokens per second,
//     sum_s E_s(k_s) / (forward(extra + sum_s (k_s + 1)) + sum_d draft(d, b_d)),
// E_s(k) = 1 + sum_{i<=k} prod_{j<=i} a_{s,j}, with a_{s,j} the sequence's running
// conditional acceptance at draft position j, forward(r) the measured cost of a target
// forward of r rows, draft(d, b) the measured cost of draft pass d over the b_d
// sequences that draft at least d tokens (cost_model.h; both for the step's number of
// sequences). Once the batch is
// compute-bound, extra verify rows cost nearly as much as plain rows and the planner
// drafts less or not at all; with one client it drafts as deep as acceptance pays.
// Each sequence probes a neighbouring depth now and then so its acceptance and the
// costs stay measured: 8 steps after its choice changes, then ever less often while it
// holds (the interval doubling, or quadrupling while no deeper draft could win even
// fully accepted, up to every 128 steps).
#pragma once
#include <span>
#include <vector>

#include "speculative/cost_model.h"

namespace nextn {

// One sequence's acceptance per draft position (decayed counts over a prior) and its
// probe schedule.
class AcceptanceEstimate {
 public:
  explicit AcceptanceEstimate(int max_depth = 16);
  // Starts a request from what the engine's drafter achieved so far (`pooled`): its
  // per-position rates, weighted as two observations, so the request soon speaks
  // for itself. The probe schedule carries on from the previous request.
  void start_from(const AcceptanceEstimate& pooled);
  // One verified step: k drafted, the first `accepted` accepted.
  void record(int k, int accepted);
  double acceptance(int pos) const;  // conditional, 0-based position
  // Expected tokens of a step with k drafts: 1 + sum_{i<=k} prod_{j<=i} a_j.
  double expected_tokens(int k) const;
  // The depth to run given the planner's `chosen` one: a neighbour when a probe is due.
  int probe(int chosen, int max_depth, bool deeper_could_win);

 private:
  void update();  // rates_ and expected_ from the counts

  std::vector<double> reached_, accepted_;  // decayed counts per position
  std::vector<double> prior_;               // prior acceptance per position
  std::vector<double> rates_;               // acceptance per position
  std::vector<double> expected_;            // expected_tokens(k), k = 0..positions
  int last_choice_ = -1;                    // the choice the probe interval counts from
  int interval_ = 0;                        // steps between probes
  int since_probe_ = 0;
  int probes_ = 0;
};

// One decoding sequence as the planner sees it.
struct PlanSequence {
  const AcceptanceEstimate* acceptance = nullptr;
  int max_depth = 0;  // drafts allowed this step (0: it does not draft)
};

class DepthPlanner {
 public:
  // `sequences`: the sequences the step's forward carries (decoding ones and any in
  // prefill); `draft_fallback`: seconds per draft pass before any was measured.
  DepthPlanner(const ForwardCostModel& forward, int sequences, const DraftCostModel& draft, double draft_fallback)
      : forward_(forward), sequences_(sequences), draft_(draft), draft_fallback_(draft_fallback) {}
  // The depths with the highest expected tokens per second; `extra_rows`: rows the same
  // forward carries besides the decode rows (prefill chunks).
  std::vector<int> plan(std::span<const PlanSequence> sequences, int extra_rows) const;
  // Expected tokens per second of the step with these depths.
  double rate(std::span<const PlanSequence> sequences, std::span<const int> depths, int extra_rows) const;
  // Whether some deeper depth for sequence s alone could beat `depths` if every one of
  // its drafts were accepted.
  bool deeper_could_win(std::span<const PlanSequence> sequences, std::span<const int> depths, size_t s,
                        int extra_rows) const;

 private:
  double step_seconds(std::span<const int> depths, int extra_rows) const;
  // The cost models' estimates, remembered: a plan evaluates a few hundred candidates.
  double forward_cost(int rows) const;
  double draft_cost(int pass, int sequences) const;

  const ForwardCostModel& forward_;
  int sequences_;
  const DraftCostModel& draft_;
  double draft_fallback_;
  mutable std::vector<double> forward_memo_, draft_memo_[2];  // < 0: not asked yet
};

}  // namespace nextn
