// speculative/cost_model.cc — see cost_model.h.
#include "speculative/cost_model.h"

#include <algorithm>
#include <cmath>

namespace nextn {

namespace {
constexpr double kCostSmoothing = 0.2;

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
    : ema_(size_t(max_rows) + 2, -1.0),
      calibrated_(size_t(max_rows) + 2, -1.0),
      experts_(size_t(max_rows) + 2, -1.0),
      samples_(size_t(max_rows) + 2, 0) {}

void VerifyCostModel::set_routing(int experts, int top_k) {
  experts_total_ = experts > 0 && top_k > 0 ? experts : 0;
  top_k_ = experts_total_ ? std::min(top_k, experts) : 0;
}

void VerifyCostModel::grow(int rows) {
  if (rows < int(ema_.size())) return;
  ema_.resize(size_t(rows) + 1, -1.0);
  calibrated_.resize(size_t(rows) + 1, -1.0);
  experts_.resize(size_t(rows) + 1, -1.0);
  samples_.resize(size_t(rows) + 1, 0);
}

void VerifyCostModel::calibrate(int rows, double seconds, double distinct_experts) {
  if (rows <= 0) return;
  grow(rows);
  calibrated_[size_t(rows)] = seconds;
  if (experts_total_ && distinct_experts > 0) experts_[size_t(rows)] = distinct_experts;
}

void VerifyCostModel::record(int rows, double seconds, double distinct_experts) {
  if (rows <= 0) return;
  grow(rows);
  const size_t r = size_t(rows);
  // A size measured at start-up already paid its one-time allocations: its first live
  // sample counts, and tells how the machine's speed moved since (the drift). It moves
  // the estimate from that measurement times the drift, counting at most twice it like
  // every later sample: a single stalled step of a size the steps seldom visit must not
  // stand for it (a stall of 5x was seen at four sequences).
  if (calibrated_[r] > 0) {
    if (samples_[r] == 0) samples_[r] = 1;
    const double ratio = std::min(seconds / calibrated_[r], 2 * drift_);
    drift_ = drift_samples_++ == 0 ? ratio : (1 - kCostSmoothing) * drift_ + kCostSmoothing * ratio;
    if (ema_[r] < 0) ema_[r] = calibrated_[r] * drift_;
  }
  smooth_cost(ema_[r], samples_[r], seconds);
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

double VerifyCostModel::at(int rows) const {
  if (rows < 1 || rows >= int(ema_.size())) return -1.0;
  if (ema_[size_t(rows)] >= 0) return ema_[size_t(rows)];
  return calibrated_[size_t(rows)] > 0 ? calibrated_[size_t(rows)] * drift_ : -1.0;
}

double VerifyCostModel::cost(int rows) const {
  if (at(rows) >= 0) return at(rows);
  // nearest measured neighbours below and above
  int lo = -1, hi = -1;
  for (int r = std::min(rows, int(ema_.size()) - 1); r >= 1; --r)
    if (at(r) >= 0) {
      lo = r;
      break;
    }
  for (int r = rows; r < int(ema_.size()); ++r)
    if (at(r) >= 0) {
      hi = r;
      break;
    }
  if (lo < 0 && hi < 0) return work(rows);  // nothing measured: relative units
  if (lo >= 0 && hi >= 0) {
    const double w = work(hi) - work(lo);
    double t = w > 0 ? (work(rows) - work(lo)) / w : double(rows - lo) / double(hi - lo);
    return at(lo) + t * (at(hi) - at(lo));
  }
  if (lo < 0) return at(hi);
  // Above every measurement: extrapolate from the slope (per unit of work: a row, or
  // a distinct expert) of the two highest measurements, or assume each extra row costs
  // 10% of one row and each extra distinct expert half of one chosen expert's share of
  // a decode row (optimistic, so that it gets tried and measured).
  int lo2 = -1;
  for (int r = lo - 1; r >= 1; --r)
    if (at(r) >= 0) {
      lo2 = r;
      break;
    }
  double slope;
  if (lo2 > 0 && work(lo) > work(lo2)) {
    slope = std::max(0.0, (at(lo) - at(lo2)) / (work(lo) - work(lo2)));
  } else if (experts_total_) {
    slope = 0.5 * at(lo) / work(lo);
  } else {
    slope = 0.1 * at(lo) / double(lo);
  }
  return at(lo) + slope * (work(rows) - work(lo));
}

bool VerifyCostModel::brackets(int rows) const {
  bool lower = false, higher = false;
  for (int r = 1; r < int(ema_.size()); ++r) {
    lower |= r < rows && at(r) >= 0;
    higher |= r > rows && at(r) >= 0;
  }
  return lower && higher;
}

int VerifyCostModel::nearest_measured(int rows) const {
  const int top = int(ema_.size()) - 1;
  for (int d = 0; d <= top; ++d) {
    if (rows - d >= 1 && rows - d <= top && at(rows - d) >= 0) return rows - d;
    if (rows + d >= 1 && rows + d <= top && at(rows + d) >= 0) return rows + d;
  }
  return -1;
}

ForwardCostModel::ForwardCostModel(int max_sequences, int max_rows)
    : curves_(size_t(std::max(1, max_sequences)) + 1, VerifyCostModel(max_rows)) {}

void ForwardCostModel::set_routing(int experts, int top_k) {
  for (VerifyCostModel& c : curves_) c.set_routing(experts, top_k);
}

VerifyCostModel& ForwardCostModel::curve_of(int sequences) {
  if (size_t(sequences) >= curves_.size()) curves_.resize(size_t(sequences) + 1, curves_[0]);
  return curves_[size_t(sequences)];
}

void ForwardCostModel::record(int sequences, int rows, double seconds, double distinct_experts) {
  if (sequences > 0) curve_of(sequences).record(rows, seconds, distinct_experts);
}

void ForwardCostModel::calibrate(int sequences, int rows, double seconds, double distinct_experts) {
  if (sequences > 0) curve_of(sequences).calibrate(rows, seconds, distinct_experts);
}

const VerifyCostModel& ForwardCostModel::curve(int sequences) const {
  return curves_[size_t(std::clamp(sequences, 1, int(curves_.size()) - 1))];
}

bool ForwardCostModel::offset(int sequences, int rows, double& out) const {
  if (sequences < 1 || size_t(sequences) >= curves_.size()) return false;
  const VerifyCostModel& own = curves_[size_t(sequences)];
  const int at = own.nearest_measured(rows);
  if (at < 0) return false;
  out = own.cost(at) - curve(1).cost(at);
  return true;
}

double ForwardCostModel::cost(int sequences, int rows) const {
  const VerifyCostModel& own = curve(sequences);
  const VerifyCostModel& single = curve(1);
  if (sequences <= 1) return single.cost(rows);
  // Measured for b at r, or on both sides of r: b's own curve.
  if (own.measured(rows) || own.brackets(rows)) return own.cost(rows);
  double extra = 0;
  if (!offset(sequences, rows, extra)) {
    // The nearest b measured, its per-sequence cost scaled to b's extra sequences.
    for (int d = 1; d < int(curves_.size()); ++d) {
      double o = 0;
      if (offset(sequences - d, rows, o) && sequences - d > 1) {
        extra = o * double(sequences - 1) / double(sequences - d - 1);
        break;
      }
      if (offset(sequences + d, rows, o)) {
        extra = o * double(sequences - 1) / double(sequences + d - 1);
        break;
      }
    }
  }
  return std::max(0.0, single.cost(rows) + extra);
}

void DraftCostModel::record(int pass, int sequences, double seconds) {
  if (sequences <= 0) return;
  const size_t p = pass > 0 ? 1 : 0, b = size_t(sequences);
  if (ema_[p].size() <= b) ema_[p].resize(b + 1, -1.0), samples_[p].resize(b + 1, 0);
  smooth_cost(ema_[p][b], samples_[p][b], seconds);
}

double DraftCostModel::cost(int pass, int sequences, double fallback) const {
  const std::vector<double>& e = ema_[pass > 0 ? 1 : 0];
  const int top = int(e.size()) - 1;
  int lo = -1, hi = -1;
  for (int b = std::min(sequences, top); b >= 1; --b)
    if (e[size_t(b)] >= 0) {
      lo = b;
      break;
    }
  for (int b = sequences; b <= top; ++b)
    if (e[size_t(b)] >= 0) {
      hi = b;
      break;
    }
  if (lo == sequences) return e[size_t(lo)];
  // Later passes not measured yet: as the first (which also catches up: pessimistic).
  if (lo < 0 && hi < 0) return pass > 0 ? cost(0, sequences, fallback) : fallback;
  if (lo < 0) return e[size_t(hi)];
  if (hi < 0) return e[size_t(lo)] * (1.0 + 0.1 * double(sequences - lo));
  const double t = double(sequences - lo) / double(hi - lo);
  return e[size_t(lo)] + t * (e[size_t(hi)] - e[size_t(lo)]);
}

}  // namespace nextn
