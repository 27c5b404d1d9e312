// tests/model/model_test_util.h — what the architecture gtests share: a random checkpoint
// made once per architecture by tools/make_checkpoint.py, a deterministic prompt, logits
// of a prompt fed in pieces, one decode step, one verify forward, and the relative
// difference of two logit sets.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model.h"

namespace nextn::model_test {

// The checkpoint of `arch` (seed `seed`) under the build's test-tmp, generated on first use.
inline std::string random_checkpoint(const std::string& arch, int seed) {
  static std::map<std::string, std::string> made;
  auto it = made.find(arch);
  if (it != made.end()) return it->second;
  namespace fs = std::filesystem;
  fs::path d = fs::path(NEXTN_BUILD_DIR) / "test-tmp" / "model-gtest" / arch;
  fs::remove_all(d);
  fs::create_directories(d.parent_path());
  std::string cmd = "/usr/bin/python3 " NEXTN_SOURCE_DIR "/tools/make_checkpoint.py --quiet --arch " + arch +
                    " --seed " + std::to_string(seed) + " --out " + d.string();
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  return made[arch] = d.string();
}

inline std::vector<int32_t> prompt_of(int n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = int32_t((i * 37 + 11) % 380);
  return tokens;
}

// Logits of every row, fed in pieces of `chunk` rows (1: token by token).
inline std::vector<float> logits_in_pieces(Model& m, SequenceState& st, const std::vector<int32_t>& tokens, int chunk) {
  std::vector<float> all;
  ForwardResult r;
  for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
    SequenceRows rows;
    rows.state = &st;
    rows.tokens = std::span<const int32_t>(tokens).subspan(start, std::min<size_t>(chunk, tokens.size() - start));
    for (size_t i = 0; i < rows.tokens.size(); ++i) rows.logit_rows.push_back(int(i));
    m.forward(std::span<SequenceRows>(&rows, 1), r);
    all.insert(all.end(), r.logits.begin(), r.logits.end());
  }
  return all;
}

// max |a − b| / max |b|.
inline double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0, s = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    d = std::max(d, double(std::abs(a[i] - b[i]))), s = std::max(s, double(std::abs(b[i])));
  return d / s;
}

// The logits of one decode step of `token`.
inline std::vector<float> one_step(Model& m, SequenceState& st, int32_t token) {
  ForwardResult r;
  SequenceRows rows;
  rows.state = &st;
  rows.tokens = std::span<const int32_t>(&token, 1);
  rows.logit_rows = {0};
  m.forward(std::span<SequenceRows>(&rows, 1), r);
  return r.logits;
}

// One verify forward of `tokens` as the engine runs it: logits of every row, and the
// state able to return to the length after any of them.
inline std::vector<float> verify_forward(Model& m, SequenceState& st, const std::vector<int32_t>& tokens) {
  ForwardResult r;
  SequenceRows rows;
  rows.state = &st;
  rows.tokens = tokens;
  rows.snapshots = true;
  for (int i = 0; i < int(tokens.size()); ++i) rows.logit_rows.push_back(i);
  m.forward(std::span<SequenceRows>(&rows, 1), r);
  return r.logits;
}

}  // namespace nextn::model_test
