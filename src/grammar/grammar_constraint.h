// grammar/grammar_constraint.h — a Grammar as a sampling Constraint for one sequence.
// What does not depend on the sequence lives in CompiledGrammar, shared by every request
// with the same grammar and vocabulary: the matcher's interned states and transitions,
// and the allowed-token set of each state (the token trie's walk, a bitset over the
// vocabulary, computed once). A sequence keeps only its state after each accepted token
// (history_), so rollback pops states. End tokens (EOS, end of turn) are allowed exactly
// where the grammar accepts; complete() is true where nothing else may follow.
#pragma once
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_trie.h"
#include "sampling/constraint.h"

namespace nextn::grammar {

class CompiledGrammar {
 public:
  // Throws GrammarLimitError when the grammar's start is already past limits.max_stacks.
  CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                  const GrammarLimits& limits = {});

  // Cost, for benchmarks: masks computed with the trie walk (cache misses) and their
  // time; masks applied to a logits row and their time (the walk included).
  struct Stats {
    long masks_built = 0, masks_applied = 0;
    double build_seconds = 0, apply_seconds = 0;
  };
  Stats stats() const;
  // How much the shared tables hold (a cache replaces tables that grew too big).
  size_t num_states() const;

 private:
  friend class GrammarConstraint;
  // The allowed set of state s (bit t: token t), from the cache or the trie walk.
  // Requires mu_ held.
  const std::vector<uint64_t>& allowed_bits(Matcher::State s);

  mutable std::mutex mu_;  // sequences may be created on other threads than the engine's
  Matcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<Matcher::State, std::vector<uint64_t>> masks_;
  Stats stats_;
};

class GrammarConstraint : public Constraint {
 public:
  GrammarConstraint(std::shared_ptr<CompiledGrammar> compiled, std::vector<int32_t> end_tokens);
  // A grammar of its own (tests, one-off use).
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                    std::vector<int32_t> end_tokens);

  bool mask(float* logits, int vocab) override;
  bool allows(int32_t token) override;
  void accept(int32_t token) override;
  void rollback(int n) override;
  int depth() const override { return int(history_.size()) - 1; }
  bool complete(int depth) const override;
  std::string failure() const override { return failure_; }

  const CompiledGrammar& compiled() const { return *g_; }

 private:
  bool is_end(int32_t token) const;
  std::shared_ptr<CompiledGrammar> g_;
  std::vector<int32_t> end_tokens_;
  std::vector<Matcher::State> history_;  // history_[i]: the state after i tokens
  std::vector<float> end_scores_;        // mask()'s scratch: the end tokens' logits
  // A limit passed while matching (GrammarLimitError): the message, and the index in
  // history_ of the state that could not be computed or masked (rolling back below it
  // forgets the failure: a rejected draft may have gone where the output never goes).
  std::string failure_;
  size_t failed_at_ = 0;
  void fail(const GrammarLimitError& e, size_t at);
};

// The compiled grammars of recent requests, by grammar text (agents send the same schema
// again and again: its masks are then already computed). Thread-safe.
class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenTrie> trie, size_t capacity = 16) : trie_(std::move(trie)), capacity_(capacity) {}
  // Compiles under `limits` when not cached; throws GrammarLimitError as
  // CompiledGrammar's constructor does.
  std::shared_ptr<CompiledGrammar> get(const std::string& key, const std::shared_ptr<const Grammar>& grammar,
                                       const GrammarLimits& limits = {});

 private:
  std::mutex mu_;
  std::shared_ptr<const TokenTrie> trie_;
  size_t capacity_;
  std::vector<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> entries_;  // most recent last
};

}  // namespace nextn::grammar
