// speculative/depth_planner.cc — see depth_planner.h.
#include "speculative/depth_planner.h"

#include <algorithm>

namespace nextn {

namespace {
constexpr double kDecay = 0.97;        // per draft at a position: recent behaviour dominates
constexpr double kPriorWeight = 2.0;   // the prior counts as two drafts at each position
constexpr double kPriorAccept = 0.7;   // before any draft of this drafter was verified
constexpr int kProbeEvery = 8;
constexpr int kProbeEveryMax = 128;
}  // namespace

AcceptanceEstimate::AcceptanceEstimate(int max_depth)
    : reached_(size_t(std::max(1, max_depth)), 0.0),
      accepted_(size_t(std::max(1, max_depth)), 0.0),
      prior_(size_t(std::max(1, max_depth)), kPriorAccept) {
  update();
}

void AcceptanceEstimate::start_from(const AcceptanceEstimate& pooled) {
  const size_t n = pooled.reached_.size();
  reached_.assign(n, 0.0);
  accepted_.assign(n, 0.0);
  prior_.resize(n);
  for (size_t i = 0; i < n; ++i) prior_[i] = pooled.acceptance(int(i));
  update();
  // The probe schedule goes on from the slot's previous request: a busy server whose
  // choice holds does not probe every new request from scratch.
}

double AcceptanceEstimate::acceptance(int pos) const {
  return rates_[size_t(std::clamp(pos, 0, int(rates_.size()) - 1))];
}

double AcceptanceEstimate::expected_tokens(int k) const {
  return expected_[size_t(std::clamp(k, 0, int(expected_.size()) - 1))];
}

void AcceptanceEstimate::update() {
  const size_t n = reached_.size();
  rates_.resize(n);
  expected_.resize(n + 1);
  expected_[0] = 1.0;
  double chain = 1.0;
  for (size_t i = 0; i < n; ++i) {
    // A position's prior is no better than the position before it: drafts rarely get
    // easier further on, and a position never reached (every first draft rejected) must
    // not make deep drafts look worth their cost.
    const double prior = i > 0 ? std::min(prior_[i], rates_[i - 1]) : prior_[i];
    rates_[i] = (accepted_[i] + kPriorWeight * prior) / (reached_[i] + kPriorWeight);
    expected_[i + 1] = expected_[i] + (chain *= rates_[i]);
  }
}

void AcceptanceEstimate::record(int k, int accepted) {
  // A position's counts decay only when it is reached again: recent drafts there
  // dominate, and a position left untried (k = 0 for a while) keeps what it measured
  // instead of drifting back to the prior between probes.
  for (int i = 0; i < k && i <= accepted && i < int(reached_.size()); ++i) {
    reached_[size_t(i)] = kDecay * reached_[size_t(i)] + 1.0;
    accepted_[size_t(i)] = kDecay * accepted_[size_t(i)] + (i < accepted ? 1.0 : 0.0);
  }
  if (k > 0) update();
}

int AcceptanceEstimate::probe(int chosen, int max_depth, bool deeper_could_win) {
  if (max_depth <= 0) return 0;
  if (chosen != last_choice_) {
    last_choice_ = chosen;
    interval_ = kProbeEvery;
    since_probe_ = 0;
  }
  if (++since_probe_ < interval_) return chosen;
  since_probe_ = 0;
  // Four times as far while no deeper draft could win even if every draft were accepted
  // (not at once to the longest: one cost sample inflated by a busy machine could then
  // hold k = 0 for 128 steps).
  interval_ = std::min((deeper_could_win ? 2 : 4) * interval_, kProbeEveryMax);
  ++probes_;
  // Alternately one deeper (its acceptance) and one shallower (its verify cost).
  const bool deeper = chosen == 0 || (chosen < max_depth && probes_ % 2 == 1);
  return deeper ? chosen + 1 : chosen - 1;
}

double DepthPlanner::forward_cost(int rows) const {
  if (forward_memo_.size() <= size_t(rows)) forward_memo_.resize(size_t(rows) + 1, -1.0);
  double& c = forward_memo_[size_t(rows)];
  if (c < 0) c = forward_.cost(sequences_, rows);
  return c;
}

double DepthPlanner::draft_cost(int pass, int sequences) const {
  std::vector<double>& memo = draft_memo_[pass > 0 ? 1 : 0];
  if (memo.size() <= size_t(sequences)) memo.resize(size_t(sequences) + 1, -1.0);
  double& c = memo[size_t(sequences)];
  if (c < 0) c = draft_.cost(pass, sequences, draft_fallback_);
  return c;
}

double DepthPlanner::step_seconds(std::span<const int> depths, int extra_rows) const {
  int rows = extra_rows, deepest = 0;
  for (int k : depths) rows += k + 1, deepest = std::max(deepest, k);
  double seconds = forward_cost(rows);
  for (int d = 1; d <= deepest; ++d) {
    int b = 0;
    for (int k : depths) b += k >= d ? 1 : 0;
    seconds += draft_cost(d - 1, b);
  }
  return seconds;
}

double DepthPlanner::rate(std::span<const PlanSequence> sequences, std::span<const int> depths,
                          int extra_rows) const {
  double tokens = 0;
  for (size_t s = 0; s < sequences.size(); ++s) tokens += sequences[s].acceptance->expected_tokens(depths[s]);
  return tokens / std::max(step_seconds(depths, extra_rows), 1e-12);
}

std::vector<int> DepthPlanner::plan(std::span<const PlanSequence> sequences, int extra_rows) const {
  const size_t n = sequences.size();
  std::vector<int> best(n, 0), trial(n, 0);
  double best_rate = rate(sequences, best, extra_rows);
  auto consider = [&](const std::vector<int>& depths) {
    if (double r = rate(sequences, depths, extra_rows); r > best_rate * (1 + 1e-12)) best_rate = r, best = depths;
  };
  // Candidates: (a) for each number of drafts in the step, the drafts that add the most
  // expected tokens — a sequence's next draft adds the chance that all of its drafts so
  // far are accepted, which only falls with depth, so taking the largest additions one by
  // one is the best spread of that many drafts; ...
  std::vector<double> chain(n, 1.0);
  for (;;) {
    size_t pick = n;
    double gain = 0;
    for (size_t s = 0; s < n; ++s)
      if (trial[s] < sequences[s].max_depth) {
        const double g = chain[s] * sequences[s].acceptance->acceptance(trial[s]);
        if (pick == n || g > gain) pick = s, gain = g;
      }
    if (pick == n) break;
    chain[pick] *= sequences[pick].acceptance->acceptance(trial[pick]);
    trial[pick] += 1;
    consider(trial);
  }
  // ... (b) the same depth for every sequence, as far as each may go (draft passes are
  // shared: sequences drafting equally deep pay each pass once) ...
  int deepest = 0;
  for (const PlanSequence& s : sequences) deepest = std::max(deepest, s.max_depth);
  for (int k = 1; k <= deepest; ++k) {
    for (size_t s = 0; s < n; ++s) trial[s] = std::min(k, sequences[s].max_depth);
    consider(trial);
  }
  // ... then local moves from the best: one sequence one draft deeper or shallower, or
  // one draft moved from one sequence to another, while that gains.
  for (int round = 0; round < 4 * (deepest + 1) * int(n); ++round) {
    const std::vector<int> start = best;
    for (size_t s = 0; s < n; ++s) {
      for (int step : {1, -1}) {
        trial = start;
        trial[s] += step;
        if (trial[s] >= 0 && trial[s] <= sequences[s].max_depth) consider(trial);
      }
      for (size_t t = 0; t < n; ++t) {
        trial = start;
        if (t == s || trial[s] == 0 || trial[t] >= sequences[t].max_depth) continue;
        trial[s] -= 1;
        trial[t] += 1;
        consider(trial);
      }
    }
    if (best == start) break;
  }
  return best;
}

bool DepthPlanner::deeper_could_win(std::span<const PlanSequence> sequences, std::span<const int> depths, size_t s,
                                    int extra_rows) const {
  const double now = rate(sequences, depths, extra_rows);
  double tokens_others = 0;
  for (size_t i = 0; i < sequences.size(); ++i)
    if (i != s) tokens_others += sequences[i].acceptance->expected_tokens(depths[i]);
  std::vector<int> trial(depths.begin(), depths.end());
  for (int k = depths[s] + 1; k <= sequences[s].max_depth; ++k) {
    trial[s] = k;
    if ((tokens_others + double(k + 1)) / std::max(step_seconds(trial, extra_rows), 1e-12) > now) return true;
  }
  return false;
}

}  // namespace nextn
