// tests/speculative/chi_square.h — Pearson chi-square tests for the distribution tests
// (goodness of fit and two-sample homogeneity) with p-values from the regularized
// upper incomplete gamma function.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace nextn::testing {

// Q(a, x) = Gamma(a, x) / Gamma(a): series for x < a + 1, continued fraction otherwise.
inline double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  double gln = std::lgamma(a);
  if (x < a + 1) {
    double ap = a, sum = 1.0 / a, del = sum;
    for (int n = 0; n < 10000; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - gln);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - gln) * h;
}

struct ChiSquare {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;
};

inline ChiSquare finish(double stat, int dof) {
  ChiSquare r;
  r.statistic = stat;
  r.dof = dof;
  r.p_value = dof > 0 ? gamma_q(dof / 2.0, stat / 2.0) : 1.0;
  return r;
}

// Observed counts against expected probabilities; cells with expected < 5 pooled.
inline ChiSquare goodness_of_fit(const std::vector<double>& observed, const std::vector<double>& probs) {
  double n = 0;
  for (double o : observed) n += o;
  double stat = 0, pool_o = 0, pool_e = 0;
  int cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    double e = probs[i] * n;
    if (e < 5) {
      pool_o += observed[i];
      pool_e += e;
      continue;
    }
    stat += (observed[i] - e) * (observed[i] - e) / e;
    ++cells;
  }
  if (pool_e >= 5) {
    stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
    ++cells;
  } else if (pool_o > 0 && pool_e <= 0) {
    stat += 1e9;  // mass where none is allowed
  }
  return finish(stat, cells - 1);
}

// Two samples over the same cells (keyed); cells with a small total pooled.
template <typename Key>
ChiSquare homogeneity(const std::map<Key, double>& a, const std::map<Key, double>& b) {
  std::map<Key, std::pair<double, double>> cells;
  double na = 0, nb = 0;
  for (auto& [k, v] : a) cells[k].first += v, na += v;
  for (auto& [k, v] : b) cells[k].second += v, nb += v;
  double stat = 0, pa = 0, pb = 0;
  int used = 0;
  auto add = [&](double oa, double ob) {
    double tot = oa + ob;
    double ea = tot * na / (na + nb), eb = tot * nb / (na + nb);
    stat += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
    ++used;
  };
  for (auto& [k, v] : cells) {
    if (v.first + v.second < 20) {
      pa += v.first;
      pb += v.second;
      continue;
    }
    add(v.first, v.second);
  }
  if (pa + pb >= 20) add(pa, pb);
  return finish(stat, used - 1);
}

}  // namespace nextn::testing
