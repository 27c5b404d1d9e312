// grammar/gbnf.h — llama.cpp's GBNF notation → Grammar.
//   root ::= item+        # comments run to the end of the line
//   item ::= "- " [^\n]+ "\n" | ("a" | [0-9]{2,4})?
// Literals "..." and classes [...] with \x \u \U \t \n \r \\ \" \] escapes, `.` (any
// character), groups, * + ? {m} {m,} {m,n}; a rule ends at a newline unless inside
// parentheses or after `|` / `::=`. The root rule is `root`. Undefined rules, left
// recursion (which a top-down matcher cannot run), code points that are not characters
// (past U+10FFFF, a lone surrogate in a literal) and syntax errors are GrammarErrors
// naming line:column.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/limits.h"

namespace nextn::grammar {

struct GrammarError : std::runtime_error {
  GrammarError(int line, int column, const std::string& what)
      : std::runtime_error(std::to_string(line) + ":" + std::to_string(column) + ": " + what), line(line),
        column(column) {}
  int line, column;
};

// Also refuses a grammar whose root matches no string (e.g. only UTF-16 surrogates), and
// throws GrammarLimitError past limits.max_elements.
Grammar parse_gbnf(std::string_view text, std::string_view root = "root", const GrammarLimits& limits = {});

// A GBNF string literal ("...") whose content is the bytes of `text`.
std::string gbnf_literal(std::string_view text);

}  // namespace nextn::grammar
