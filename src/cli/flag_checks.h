// cli/flag_checks.h — checks for numeric flags, so that a value the program cannot run
// with stops it at start (exit 2, the message naming the flag) instead of starting a
// server that hangs or misbehaves later. CLI11's own Range lets NaN through (every
// comparison with NaN is false), so reals go through finite_in().
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace nextn {

// The number all of `text` spells (parse: std::stod or std::stoll), or nothing.
template <typename T, typename Parse>
std::optional<T> parse_whole(const std::string& text, Parse parse) {
  try {
    size_t used = 0;
    T v = parse(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// A finite real number in [lo, hi].
inline CLI::Validator finite_in(double lo, double hi = std::numeric_limits<double>::max()) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        auto v = parse_whole<double>(text, [](const std::string& t, size_t* used) { return std::stod(t, used); });
        if (!v) return "expected a number, got '" + text + "'";
        if (!std::isfinite(*v)) return "expected a finite number, got '" + text + "'";
        if (*v < lo || *v > hi)
          return "must be in [" + CLI::detail::to_string(lo) + ", " +
                 (hi == std::numeric_limits<double>::max() ? std::string("inf") : CLI::detail::to_string(hi)) +
                 "], got " + text;
        return {};
      },
      "FINITE");
}

// An integer in [lo, hi] (the value is parsed as a long long before the flag's own type
// sees it, so -1 cannot wrap into a huge unsigned value).
inline CLI::Validator integer_in(long long lo, long long hi = std::numeric_limits<long long>::max()) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        auto v = parse_whole<long long>(text, [](const std::string& t, size_t* used) { return std::stoll(t, used); });
        if (!v) return "expected an integer, got '" + text + "'";
        if (*v < lo || *v > hi)
          return "must be in " + std::to_string(lo) + ".." +
                 (hi == std::numeric_limits<long long>::max() ? std::string("") : std::to_string(hi)) + ", got " + text;
        return {};
      },
      "INT");
}

}  // namespace nextn
