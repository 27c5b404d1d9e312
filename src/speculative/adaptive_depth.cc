// speculative/adaptive_depth.cc — the adaptive draft-length policy and the verify cost model.
#include "speculative/adaptive_depth.h"

#include <algorithm>
#include <cmath>

namespace nextn {

namespace {
constexpr double kDecay = 0.97;       // per draft at a position: recent behaviour dominates
constexpr double kPriorAccept = 1.4;  // prior pseudo-counts: 0.7 acceptance, weight 2
constexpr double kPriorReached = 2.0;
constexpr double kCostSmoothing = 0.2;
constexpr int kProbeEvery = 8;
constexpr int kProbeEveryMax = 128;

// A running cost estimate: the first sample is dropped (the first forward of a size, or
// the first draft, pays one-time allocations: the hybrid 0.8B's first 4-row verify took
// 12x its later cost), and later ones count at most twice the estimate (a busy machine
// stalls single steps). Rare probes would otherwise leave an outlier standing for long.
void smooth_cost(double& estimate, int& samples, double seconds) {
  if (samples++ == 0) return;
  estimate = estimate < 0 ? seconds
                          : (1 - kCostSmoothing) * estimate + kCostSmoothing * std::min(seconds, 2 * estimate);
}
}  // namespace

VerifyCostModel::VerifyCostModel(int max_rows)
    : ema_(size_t(max_rows) + 2, -1.0), experts_(size_t(max_rows) + 2, -1.0), samples_(size_t(max_rows) + 2, 0) {}

void VerifyCostModel::set_routing(int experts, int top_k) {
  experts_total_ = experts > 0 && top_k > 0 ? experts : 0;
  top_k_ = experts_total_ ? std::min(top_k, experts) : 0;
}

void VerifyCostModel::record(int rows, double seconds, double distinct_experts) {
  if (rows <= 0) return;
  if (rows >= int(ema_.size())) {
    ema_.resize(size_t(rows) + 1, -1.0);
    experts_.resize(size_t(rows) + 1, -1.0);
    samples_.resize(size_t(rows) + 1, 0);
  }
  smooth_cost(ema_[size_t(rows)], samples_[size_t(rows)], seconds);
  if (experts_total_ && distinct_experts > 0) {
    double& d = experts_[size_t(rows)];
    d = d < 0 ? distinct_experts : (1 - kCostSmoothing) * d + kCostSmoothing * distinct_experts;
  }
}

double VerifyCostModel::work(int rows) const {
  if (!experts_total_) return double(rows);
  if (rows < int(experts_.size()) && experts_[size_t(rows)] > 0) return experts_[size_t(rows)];
  // Independent uniform routing, scaled by how the measured counts compare with it
  // (tokens of one text share experts more than chance).
  auto uniform = [&](int r) {
    return double(experts_total_) * (1.0 - std::pow(1.0 - double(top_k_) / experts_total_, r));
  };
  double ratio = 1.0;
  for (int r = std::min(rows, int(experts_.size()) - 1); r >= 1; --r)
    if (experts_[size_t(r)] > 0) {
      ratio = experts_[size_t(r)] / uniform(r);
      break;
    }
  return std::max(double(top_k_), std::min(double(experts_total_), uniform(rows) * ratio));
}

double VerifyCostModel::cost(int rows) const {
  if (rows < int(ema_.size()) && ema_[size_t(rows)] >= 0) return ema_[size_t(rows)];
  // nearest measured neighbours below and above
  int lo = -1, hi = -1;
  for (int r = std::min(rows, int(ema_.size()) - 1); r >= 1; --r)
    if (ema_[size_t(r)] >= 0) {
      lo = r;
      break;
    }
  for (int r = rows; r < int(ema_.size()); ++r)
    if (ema_[size_t(r)] >= 0) {
      hi = r;
      break;
    }
  if (lo < 0 && hi < 0) return work(rows);  // nothing measured: relative units
  if (lo >= 0 && hi >= 0) {
    const double w = work(hi) - work(lo);
    double t = w > 0 ? (work(rows) - work(lo)) / w : double(rows - lo) / double(hi - lo);
    return ema_[size_t(lo)] + t * (ema_[size_t(hi)] - ema_[size_t(lo)]);
  }
  if (lo < 0) return ema_[size_t(hi)];
  // Above every measurement: extrapolate from the slope (per unit of work: a row, or
  // a distinct expert) of the two highest measurements, or assume each extra row costs
  // 10% of one row and each extra distinct expert half of one chosen expert's share of
  // a decode row (optimistic, so that it gets tried and measured).
  int lo2 = -1;
  for (int r = lo - 1; r >= 1; --r)
    if (ema_[size_t(r)] >= 0) {
      lo2 = r;
      break;
    }
  double slope;
  if (lo2 > 0 && work(lo) > work(lo2)) {
    slope = std::max(0.0, (ema_[size_t(lo)] - ema_[size_t(lo2)]) / (work(lo) - work(lo2)));
  } else if (experts_total_) {
    slope = 0.5 * ema_[size_t(lo)] / work(lo);
  } else {
    slope = 0.1 * ema_[size_t(lo)] / double(lo);
  }
  return ema_[size_t(lo)] + slope * (work(rows) - work(lo));
}

AdaptiveDepth::AdaptiveDepth(int max_k)
    : max_k_(std::max(1, max_k)), reached_(size_t(max_k_), 0.0), accepted_(size_t(max_k_), 0.0) {}

double AdaptiveDepth::acceptance(int pos) const {
  return (accepted_[size_t(pos)] + kPriorAccept) / (reached_[size_t(pos)] + kPriorReached);
}

int AdaptiveDepth::choose(const VerifyCostModel& costs) {
  double draft = draft_cost_ >= 0 ? draft_cost_ : 0.05 * costs.cost(1);
  double base = costs.cost(1);
  int best = 0;
  double best_rate = 1.0 / base;
  double expected = 1.0, chain = 1.0;
  for (int k = 1; k <= max_k_; ++k) {
    chain *= acceptance(k - 1);
    expected += chain;
    double rate = expected / (draft * k + costs.cost(k + 1));
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  // Probes keep the neighbours measured: alternately one deeper (its acceptance) and
  // one shallower (its verify cost; k = 0 measures the plain decode row).
  if (best != last_best_) {
    last_best_ = best;
    probe_interval_ = kProbeEvery;
  }
  if (++since_probe_ < probe_interval_) return best;
  since_probe_ = 0;
  // Four times as far while no deeper draft could win even if every draft were accepted
  // (not at once to the longest: one cost sample inflated by a busy machine could then
  // hold k = 0 for 128 steps).
  probe_interval_ = std::min((deeper_could_win(costs, best, best_rate, draft) ? 2 : 4) * probe_interval_, kProbeEveryMax);
  ++probes_;
  const bool deeper = best == 0 || (best < max_k_ && probes_ % 2 == 1);
  return deeper ? best + 1 : best - 1;
}

bool AdaptiveDepth::deeper_could_win(const VerifyCostModel& costs, int best, double best_rate, double draft) const {
  for (int k = best + 1; k <= max_k_; ++k)
    if (double(k + 1) / (draft * k + costs.cost(k + 1)) > best_rate) return true;
  return false;
}

void AdaptiveDepth::record(int k, int accepted, double draft_seconds) {
  // A position's counts decay only when it is reached again: recent drafts there
  // dominate, and a position left untried (k = 0 for a while) keeps what it measured
  // instead of drifting back to the prior between probes.
  for (int i = 0; i < k && i <= accepted && i < max_k_; ++i) {
    reached_[size_t(i)] = kDecay * reached_[size_t(i)] + 1.0;
    accepted_[size_t(i)] = kDecay * accepted_[size_t(i)] + (i < accepted ? 1.0 : 0.0);
  }
  if (k > 0) smooth_cost(draft_cost_, draft_samples_, draft_seconds / k);
}

}  // namespace nextn
