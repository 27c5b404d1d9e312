// cli/logit_stats.cc — KL, perplexity and top-1 agreement of logit rows, in double.
#include "cli/logit_stats.h"

#include <algorithm>
#include <cmath>

namespace nextn {
namespace {

void log_softmax(const float* x, int n, std::vector<double>& out) {
  out.resize(static_cast<size_t>(n));
  const double mx = *std::max_element(x, x + n);
  double z = 0;
  for (int i = 0; i < n; ++i) z += std::exp(double(x[i]) - mx);
  const double lz = mx + std::log(z);
  for (int i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - lz;
}

}  // namespace

void LogitStats::add(const float* reference, const float* row, int vocab, int32_t next) {
  log_softmax(row, vocab, lp_);
  log_softmax(reference, vocab, lp_ref_);
  double kl = 0;
  for (int v = 0; v < vocab; ++v) kl += std::exp(lp_ref_[size_t(v)]) * (lp_ref_[size_t(v)] - lp_[size_t(v)]);
  kl_sum_ += std::max(0.0, kl);  // ≥ 0 in exact arithmetic; rounding may dip below
  ++rows_;
  if (next >= 0 && next < vocab) {
    nll_sum_ -= lp_[size_t(next)];
    ++scored_;
  }
  top1_same_ += (std::max_element(row, row + vocab) - row) == (std::max_element(reference, reference + vocab) - reference);
}

double LogitStats::perplexity() const { return std::exp(nll_sum_ / double(std::max<long>(1, scored_))); }

}  // namespace nextn
