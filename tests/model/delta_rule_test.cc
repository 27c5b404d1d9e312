// tests/model/delta_rule_test.cc — the gated delta rule's kernels (model/delta_rule.h)
// against the rule itself in float64, written here from its equations one token at a
// time: S ← αS;  S ← S + k (β (v − Sᵀk))ᵀ;  o = Sᵀq.
// Inputs look like the layer's: q and k l2-normalized (q also scaled by dk^-½), β in
// (0, 1), g = log α ≤ 0, values of unit size. Relative error is measured on the output
// rows and the final state against the largest magnitude of each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "model/delta_rule.h"

namespace nextn {
namespace {

struct Rows {
  int n, dk, dv;
  size_t stride;                    // q, k and v row stride (the layer's conv channels)
  std::vector<float> qkv;           // [n, stride]: q | k | v at 0, dk, 2·dk
  std::vector<float> beta_g;        // [n, 2]: β, g
  std::vector<float> s0;            // [dk, dv] the state before the first row
};

Rows make_rows(int n, int dk, int dv, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  Rows r{n, dk, dv, size_t(2 * dk + dv + 3), {}, {}, {}};
  r.qkv.resize(size_t(n) * r.stride);
  r.beta_g.resize(size_t(n) * 2);
  for (int t = 0; t < n; ++t) {
    float* row = r.qkv.data() + size_t(t) * r.stride;
    for (int part = 0; part < 2; ++part) {
      float* x = row + part * dk;
      double ss = 0.0;
      for (int i = 0; i < dk; ++i) {
        x[i] = normal(rng);
        ss += double(x[i]) * x[i];
      }
      const double f = (part == 0 ? 1.0 / std::sqrt(double(dk)) : 1.0) / std::sqrt(ss);
      for (int i = 0; i < dk; ++i) x[i] = float(x[i] * f);
    }
    for (int j = 0; j < dv; ++j) row[2 * dk + j] = normal(rng);
    r.beta_g[size_t(t) * 2] = 0.05f + 0.9f * unit(rng);
    r.beta_g[size_t(t) * 2 + 1] = -0.3f * unit(rng);  // α in (0.74, 1]
  }
  r.s0.resize(size_t(dk) * dv);
  for (float& x : r.s0) x = 0.3f * normal(rng);
  return r;
}

// The per-token rule in float64: outputs [n, dv] and the final state.
void reference(const Rows& r, std::vector<double>& o, std::vector<double>& S) {
  const int dk = r.dk, dv = r.dv;
  S.assign(r.s0.begin(), r.s0.end());
  o.assign(size_t(r.n) * dv, 0.0);
  std::vector<double> m(static_cast<size_t>(dv));
  for (int t = 0; t < r.n; ++t) {
    const float* row = r.qkv.data() + size_t(t) * r.stride;
    const float *q = row, *k = row + dk, *v = row + 2 * dk;
    const double alpha = std::exp(double(r.beta_g[size_t(t) * 2 + 1])), beta = r.beta_g[size_t(t) * 2];
    for (double& x : S) x *= alpha;
    std::fill(m.begin(), m.end(), 0.0);
    for (int i = 0; i < dk; ++i)
      for (int j = 0; j < dv; ++j) m[size_t(j)] += S[size_t(i) * dv + j] * k[i];
    for (int i = 0; i < dk; ++i)
      for (int j = 0; j < dv; ++j) S[size_t(i) * dv + j] += k[i] * beta * (v[j] - m[size_t(j)]);
    for (int i = 0; i < dk; ++i)
      for (int j = 0; j < dv; ++j) o[size_t(t) * dv + j] += S[size_t(i) * dv + j] * q[i];
  }
}

double max_rel(const std::vector<float>& got, const std::vector<double>& want) {
  double scale = 0.0, err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    err = std::max(err, std::fabs(double(got[i]) - want[i]));
  }
  return err / scale;
}

// Float32 sums of up to dk + chunk terms of unit size, chained over n rows through the
// state (which decays): a few ulps per product and row (measured: 2e-7 to 6e-7).
constexpr double kTolerance = 1e-5;

TEST(DeltaRule, ChunkedFormEqualsTheRuleTokenByToken) {
  struct Case { int n, chunk, dk, dv; };
  // The layer's 128 × 128 heads with chunks of 64 (one short chunk, exact chunks, a
  // chunk boundary plus a tail), and sizes that leave every edge of the tiles: rows not
  // a multiple of 4, columns not a multiple of the vector width.
  for (const Case& cs : {Case{1, 64, 128, 128}, Case{5, 64, 128, 128}, Case{64, 64, 128, 128},
                         Case{130, 64, 128, 128}, Case{37, 16, 48, 40}, Case{23, 7, 13, 21}, Case{9, 64, 3, 5}}) {
    const Rows r = make_rows(cs.n, cs.dk, cs.dv, unsigned(cs.n * 31 + cs.chunk));
    std::vector<double> o_ref, s_ref;
    reference(r, o_ref, s_ref);
    std::vector<float> S = r.s0, o(size_t(cs.n) * cs.dv, -1.0f);
    DeltaChunkScratch scratch;
    chunked_delta_rule(S.data(), r.qkv.data(), r.qkv.data() + cs.dk, r.qkv.data() + 2 * cs.dk, r.stride,
                       r.beta_g.data(), r.beta_g.data() + 1, 2, cs.n, cs.chunk, cs.dk, cs.dv, o.data(), size_t(cs.dv),
                       scratch);
    const std::string what = "n " + std::to_string(cs.n) + ", chunk " + std::to_string(cs.chunk) + ", dk " +
                             std::to_string(cs.dk) + ", dv " + std::to_string(cs.dv);
    EXPECT_LE(max_rel(o, o_ref), kTolerance) << what << ": outputs";
    EXPECT_LE(max_rel(S, s_ref), kTolerance) << what << ": state";
  }
}

std::vector<DeltaRow> rows_of(const Rows& r, int from, int to, std::vector<float>& o) {
  std::vector<DeltaRow> rows;
  for (int t = from; t < to; ++t) {
    const float* row = r.qkv.data() + size_t(t) * r.stride;
    rows.push_back({row, row + r.dk, row + 2 * r.dk, std::exp(r.beta_g[size_t(t) * 2 + 1]), r.beta_g[size_t(t) * 2],
                    o.data() + size_t(t) * r.dv});
  }
  return rows;
}

TEST(DeltaRule, RowsEqualTheRule) {
  for (const auto& [dk, dv] : {std::pair{128, 128}, std::pair{48, 40}, std::pair{13, 21}}) {
    const Rows r = make_rows(12, dk, dv, unsigned(dk + dv));
    std::vector<double> o_ref, s_ref;
    reference(r, o_ref, s_ref);
    std::vector<float> S(r.s0.size()), o(size_t(r.n) * dv);
    const auto rows = rows_of(r, 0, r.n, o);
    delta_rule_rows(r.s0.data(), S.data(), rows.data(), r.n, dk, dv);  // s_in kept, s_out written
    EXPECT_LE(max_rel(o, o_ref), kTolerance) << "dk " << dk << ", dv " << dv;
    EXPECT_LE(max_rel(S, s_ref), kTolerance) << "dk " << dk << ", dv " << dv;
  }
}

// Decode runs rows one call each, a verify all of them in one call, a rollback re-applies
// some as state-only rows: every grouping gives the same bits.
TEST(DeltaRule, RowsGiveTheSameBitsHoweverGrouped) {
  const Rows r = make_rows(9, 128, 128, 3);
  std::vector<float> o_all(size_t(r.n) * r.dv), S_all(r.s0.size());
  const auto all = rows_of(r, 0, r.n, o_all);
  delta_rule_rows(r.s0.data(), S_all.data(), all.data(), r.n, r.dk, r.dv);

  std::vector<float> o_one(o_all.size()), S_one = r.s0;
  for (int t = 0; t < r.n; ++t) {
    const auto one = rows_of(r, t, t + 1, o_one);
    delta_rule_rows(S_one.data(), S_one.data(), one.data(), 1, r.dk, r.dv);
  }
  EXPECT_EQ(o_one, o_all);
  EXPECT_EQ(S_one, S_all);

  std::vector<float> o_unused(o_all.size()), S_split(r.s0.size());
  auto first = rows_of(r, 0, 4, o_unused);
  for (DeltaRow& row : first) row.q = nullptr, row.o = nullptr;  // state only, as a replay
  delta_rule_rows(r.s0.data(), S_split.data(), first.data(), 4, r.dk, r.dv);
  std::vector<float> o_rest(o_all.size());
  const auto rest = rows_of(r, 4, r.n, o_rest);
  delta_rule_rows(S_split.data(), S_split.data(), rest.data(), r.n - 4, r.dk, r.dv);
  EXPECT_EQ(S_split, S_all);
  EXPECT_TRUE(std::equal(o_rest.begin() + 4 * r.dv, o_rest.end(), o_all.begin() + 4 * r.dv));
}

// A forward's replayed rows ending in a checkpoint and its own rows after them, in one
// call, against two calls: the checkpoint, the outputs and (when kept) the final state
// are the same bits; with no output plane the rows still give the same outputs. dv 130
// leaves columns past the last whole vector.
TEST(DeltaRule, CheckpointAndDroppedStateGiveTheSameBits) {
  const Rows r = make_rows(9, 128, 130, 5);
  constexpr int kReplayed = 4;
  std::vector<float> unused(size_t(r.n) * r.dv), o_two(unused.size()), mid_two(r.s0.size()), out_two(r.s0.size());
  auto replayed = rows_of(r, 0, kReplayed, unused);
  for (DeltaRow& row : replayed) row.q = nullptr, row.o = nullptr;  // state only
  delta_rule_rows(r.s0.data(), mid_two.data(), replayed.data(), kReplayed, r.dk, r.dv);
  const auto fresh = rows_of(r, kReplayed, r.n, o_two);
  delta_rule_rows(mid_two.data(), out_two.data(), fresh.data(), r.n - kReplayed, r.dk, r.dv);
  for (const bool keep_out : {true, false}) {
    std::vector<float> o(o_two.size()), mid(r.s0.size()), out(r.s0.size(), -1.0f);
    auto rows = replayed;
    for (const DeltaRow& row : rows_of(r, kReplayed, r.n, o)) rows.push_back(row);
    delta_rule_rows(r.s0.data(), mid.data(), kReplayed, keep_out ? out.data() : nullptr, rows.data(), r.n, r.dk, r.dv);
    EXPECT_EQ(mid, mid_two) << "output plane " << keep_out;
    EXPECT_EQ(o, o_two) << "output plane " << keep_out;
    if (keep_out) EXPECT_EQ(out, out_two);
    else EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == -1.0f; }));
  }
}

}  // namespace
}  // namespace nextn
