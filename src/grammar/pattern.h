// grammar/pattern.h — a JSON Schema "pattern" (ECMA/Python regex subset) → a GBNF
// expression for the content of a JSON string that matches it in full (a full match is
// also what the unanchored `pattern` asks for). Literals, ., classes [...] [^...] with
// ranges and \d \w \s, groups (...) (?:...), |, * + ? {n} {n,} {n,m} (lazy forms too),
// ^ at the start and $ at the end. Generated characters stay valid inside a JSON string:
// " and \ come out escaped, control characters are never generated (\s is a space).
// Anything else (backreferences, lookaround, \b, named groups) → PatternError with the
// offset.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace nextn::grammar {

struct PatternError : std::runtime_error {
  PatternError(size_t offset, const std::string& what)
      : std::runtime_error("at offset " + std::to_string(offset) + ": " + what), offset(offset) {}
  size_t offset;
};

std::string pattern_to_gbnf(std::string_view pattern);

}  // namespace nextn::grammar
