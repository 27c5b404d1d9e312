// speculative/counters.h — counters of speculative decoding: drafts proposed, draft
// tokens, tokens accepted (in total and per draft position), derived rates and the
// `a/t (x.x%)` text used in log lines.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nextn {

struct SpeculativeCounters {
  uint64_t drafts = 0;          // speculative steps with at least one draft
  uint64_t draft_tokens = 0;    // tokens drafted
  uint64_t accepted = 0;        // drafted tokens accepted
  std::vector<uint64_t> drafted_per_pos;   // drafts made at position i (0-based)
  std::vector<uint64_t> accepted_per_pos;  // drafts accepted at position i
  // The same per part of a chained drafter (mtp+suffix: which part proposed each step's
  // drafts), as verified; empty when a single drafter proposes everything.
  struct PerDrafter {
    std::string name;
    uint64_t drafts = 0, draft_tokens = 0, accepted = 0;
  };
  std::vector<PerDrafter> by_drafter;

  // One verification of k drafts of which the first a were accepted.
  void record(int k, int a);
  // The same, credited to `drafter` (a chain's part; null: not split).
  void record(int k, int a, const char* drafter);
  void add(const SpeculativeCounters& other);
  double acceptance_rate() const { return draft_tokens ? double(accepted) / double(draft_tokens) : 0.0; }
  // Tokens emitted per speculative step: 1 + accepted / drafts.
  double mean_accepted_length() const { return drafts ? 1.0 + double(accepted) / double(drafts) : 0.0; }
};

// "a/t (x.x%)"
std::string format_acceptance(uint64_t accepted, uint64_t total);
// "0:12 2:30" — decode steps per chosen depth (depths never chosen left out).
std::string format_depths(const std::vector<uint64_t>& steps_per_depth);
// "p0 a/t (x%), p1 ..." — acceptance per draft position.
std::string format_acceptance_per_pos(const std::vector<uint64_t>& drafted, const std::vector<uint64_t>& accepted);

}  // namespace nextn
