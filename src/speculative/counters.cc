// speculative/counters.cc — speculative decoding counters and their text forms.
#include "speculative/counters.h"

#include <fmt/format.h>

#include <algorithm>

namespace nextn {

void SpeculativeCounters::record(int k, int a) {
  if (k <= 0) return;
  drafts += 1;
  draft_tokens += uint64_t(k);
  accepted += uint64_t(a);
  if (drafted_per_pos.size() < size_t(k)) {
    drafted_per_pos.resize(size_t(k), 0);
    accepted_per_pos.resize(size_t(k), 0);
  }
  for (int i = 0; i < k; ++i) drafted_per_pos[size_t(i)] += 1;
  for (int i = 0; i < a; ++i) accepted_per_pos[size_t(i)] += 1;
}

namespace {
SpeculativeCounters::PerDrafter& entry(std::vector<SpeculativeCounters::PerDrafter>& list, const std::string& name) {
  for (auto& e : list)
    if (e.name == name) return e;
  list.push_back({name});
  return list.back();
}
}  // namespace

void SpeculativeCounters::record(int k, int a, const char* drafter) {
  record(k, a);
  if (k <= 0 || !drafter) return;
  PerDrafter& e = entry(by_drafter, drafter);
  e.drafts += 1;
  e.draft_tokens += uint64_t(k);
  e.accepted += uint64_t(a);
}

void SpeculativeCounters::add(const SpeculativeCounters& o) {
  for (const PerDrafter& p : o.by_drafter) {
    PerDrafter& e = entry(by_drafter, p.name);
    e.drafts += p.drafts;
    e.draft_tokens += p.draft_tokens;
    e.accepted += p.accepted;
  }
  drafts += o.drafts;
  draft_tokens += o.draft_tokens;
  accepted += o.accepted;
  size_t n = std::max(drafted_per_pos.size(), o.drafted_per_pos.size());
  drafted_per_pos.resize(n, 0);
  accepted_per_pos.resize(n, 0);
  for (size_t i = 0; i < o.drafted_per_pos.size(); ++i) {
    drafted_per_pos[i] += o.drafted_per_pos[i];
    accepted_per_pos[i] += o.accepted_per_pos[i];
  }
}

std::string format_acceptance(uint64_t accepted, uint64_t total) {
  double pct = total ? 100.0 * double(accepted) / double(total) : 0.0;
  return fmt::format("{}/{} ({:.1f}%)", accepted, total, pct);
}

std::string format_acceptance_per_pos(const std::vector<uint64_t>& drafted, const std::vector<uint64_t>& accepted) {
  std::string out;
  for (size_t i = 0; i < drafted.size(); ++i) {
    if (!out.empty()) out += ", ";
    uint64_t a = i < accepted.size() ? accepted[i] : 0;
    out += fmt::format("pos{} {}", i + 1, format_acceptance(a, drafted[i]));
  }
  return out;
}

std::string format_depths(const std::vector<uint64_t>& steps_per_depth) {
  std::string out;
  for (size_t k = 0; k < steps_per_depth.size(); ++k)
    if (steps_per_depth[k]) out += fmt::format("{}{}:{}", out.empty() ? "" : " ", k, steps_per_depth[k]);
  return out;
}

}  // namespace nextn
