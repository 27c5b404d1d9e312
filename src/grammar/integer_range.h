// grammar/integer_range.h — the decimal integers of a range as one GBNF expression
// (JSON Schema minimum/maximum on integers): exactly the numbers in [lo, hi], written
// without leading zeros or "-0", at most 16 digits.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace nextn::grammar {

// Integers in [lo, hi]; nullopt: unbounded on that side ("" when the range is empty).
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace nextn::grammar
