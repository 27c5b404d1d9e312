// grammar/grammar.h — src/grammar owns constrained decoding (structured output): a
// context-free Grammar (parsed from GBNF, gbnf.h, or compiled from a JSON Schema,
// json_schema.h), a byte-level pushdown Matcher over it (matcher.h), the token trie that
// turns a matcher state into a mask over the model's vocabulary (token_trie.h), and
// GrammarConstraint (grammar_constraint.h), the per-sequence sampling/constraint.h the
// engine applies to drafts and verification alike.
//
// This file: the grammar as flat data. Every rule is a list of alternatives; every
// alternative is a run of elements in `elements` ending with a kEnd element. An element
// matches one code point (a set of ranges, possibly negated) or refers to a rule.
// Repetition operators are rewritten into helper rules by the parser.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nextn::grammar {

struct CharRange {
  uint32_t lo = 0, hi = 0;  // inclusive code points
};

struct Element {
  enum class Kind : uint8_t { kChars, kRule, kEnd };
  Kind kind = Kind::kEnd;
  bool negated = false;     // kChars: matches every code point outside the ranges
  int32_t rule = -1;        // kRule: the rule referred to
  uint32_t first_range = 0; // kChars: ranges[first_range .. first_range + num_ranges)
  uint32_t num_ranges = 0;
};

// Whether a character set — `n` ranges, negated or not — holds some code point of [lo, hi].
bool ranges_match_some(const CharRange* ranges, uint32_t n, bool negated, uint32_t lo, uint32_t hi);

struct Grammar {
  std::vector<std::string> rule_names;
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: index of each alternative's first element
  std::vector<Element> elements;
  std::vector<CharRange> ranges;
  int32_t root = 0;

  // Whether a kChars element accepts code point cp.
  bool matches(const Element& e, uint32_t cp) const {
    bool in = false;
    for (uint32_t i = 0; i < e.num_ranges && !in; ++i) {
      const CharRange& r = ranges[e.first_range + i];
      in = cp >= r.lo && cp <= r.hi;
    }
    return in != e.negated;
  }
  // Whether a kChars element accepts some code point in [lo, hi].
  bool matches_some(const Element& e, uint32_t lo, uint32_t hi) const;
};

}  // namespace nextn::grammar
