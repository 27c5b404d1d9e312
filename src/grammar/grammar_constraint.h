// grammar/grammar_constraint.h — a Grammar as a sampling Constraint for one sequence.
// The state after each accepted token is kept (history_), so rollback pops states; the
// allowed-token set of each matcher state is computed once with the token trie and
// cached (a bitset over the vocabulary). End tokens (EOS, end of turn) are allowed
// exactly where the grammar accepts; complete() is true where nothing else may follow.
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_trie.h"
#include "sampling/constraint.h"

namespace nextn::grammar {

class GrammarConstraint : public Constraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                    std::vector<int32_t> end_tokens);

  bool mask(float* logits, int vocab) override;
  bool allows(int32_t token) override;
  void accept(int32_t token) override;
  void rollback(int n) override;
  int depth() const override { return int(history_.size()) - 1; }
  bool complete(int depth) const override;

  // The allowed set of the current state (bit t: token t), computed on first use.
  const std::vector<uint64_t>& allowed_bits();
  // Cost, for benchmarks: masks computed with the trie walk (cache misses) and their
  // time; masks applied to a logits row and their time (the walk included).
  struct Stats {
    long masks_built = 0, masks_applied = 0;
    double build_seconds = 0, apply_seconds = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  bool is_end(int32_t token) const;
  Matcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> end_tokens_;
  std::vector<Matcher::State> history_;  // history_[i]: the state after i tokens
  std::unordered_map<Matcher::State, std::vector<uint64_t>> masks_;
  Stats stats_;
};

}  // namespace nextn::grammar
