// tests/engine/constraint_util.h — a grammar constraint for a test checkpoint: the
// checkpoint's own tokenizer gives each id's bytes (vocabulary_bytes), as the server does.
#pragma once
#include <memory>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace nextn::testing {

struct ConstraintFactory {
  std::shared_ptr<const grammar::Grammar> grammar;
  std::shared_ptr<const grammar::TokenTrie> trie;
  std::vector<int32_t> ends;
  std::shared_ptr<Constraint> make() const { return std::make_shared<grammar::GrammarConstraint>(grammar, trie, ends); }
};

inline ConstraintFactory constraint_factory(const std::string& model_dir, int vocab, const std::string& gbnf,
                                            std::vector<int32_t> ends = {}) {
  return {std::make_shared<grammar::Grammar>(grammar::parse_gbnf(gbnf)),
          std::make_shared<grammar::TokenTrie>(vocabulary_bytes(*Tokenizer::load(model_dir), vocab)), std::move(ends)};
}

}  // namespace nextn::testing
