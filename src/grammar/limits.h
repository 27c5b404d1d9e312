// grammar/limits.h — the bounds structured output compiles and runs under. Grammars and
// schemas come from clients, so every cost that input controls has a limit here, and
// going past one is a GrammarLimitError that names it (a 400 at the server, naming the
// flag that raises it).
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>

namespace nextn::grammar {

struct GrammarLimits {
  // Schema levels entered at once, a followed $ref counting as one (--schema-max-depth).
  int schema_max_depth = 256;
  // Grammar elements once counted repetitions are written out (--grammar-max-elements).
  size_t max_elements = size_t(1) << 20;
  // Parse stacks alive at once in the matcher: how ambiguous the grammar may be at any
  // point of the output (--grammar-max-stacks). JSON Schema grammars stay below ~100.
  size_t max_stacks = 4096;
};

struct GrammarLimitError : std::runtime_error {
  GrammarLimitError(const std::string& what, std::string flag) : std::runtime_error(what), flag(std::move(flag)) {}
  std::string flag;  // the command-line flag that raises the limit
};

}  // namespace nextn::grammar
