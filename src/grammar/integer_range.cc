// grammar/integer_range.cc — see integer_range.h. The range is split by digit count;
// within one length, [a, b] is a shared prefix, then the low edge, the full middle digits
// and the high edge (the decomposition regex range generators use).
#include "grammar/integer_range.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace nextn::grammar {

namespace {

std::string digits_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return fmt::format("[{}-{}]", lo, hi);
}

// Decimal strings of equal length n, a <= b, as one GBNF expression.
std::string same_length_range(const std::string& a, const std::string& b) {
  size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return "\"" + a + "\"";
  bool zeros = a.find_first_not_of('0', 1) == std::string::npos;
  bool nines = b.find_first_not_of('9', 1) == std::string::npos;
  std::string rest = n > 1 ? fmt::format(" [0-9]{{{}}}", n - 1) : "";
  if (zeros && nines) return digits_class(a[0], b[0]) + rest;
  if (a[0] == b[0]) return std::string("\"") + a[0] + "\" " + same_length_range(a.substr(1), b.substr(1));
  std::vector<std::string> alts;
  alts.push_back(std::string("\"") + a[0] + "\" " + same_length_range(a.substr(1), std::string(n - 1, '9')));
  if (a[0] + 1 <= b[0] - 1) alts.push_back(digits_class(char(a[0] + 1), char(b[0] - 1)) + rest);
  alts.push_back(std::string("\"") + b[0] + "\" " + same_length_range(std::string(n - 1, '0'), b.substr(1)));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}


// 0 <= lo <= hi, both below 10^16.
std::string nonneg_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  std::string a = std::to_string(lo), b = std::to_string(hi);
  for (size_t len = a.size(); len <= b.size(); ++len) {
    std::string from = len == a.size() ? a : "1" + std::string(len - 1, '0');
    std::string to = len == b.size() ? b : std::string(len, '9');
    alts.push_back(same_length_range(from, to));
  }
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

}  // namespace

std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  const int64_t big = 9999999999999999;  // 16 nines
  std::vector<std::string> alts;
  // Negative values: -(k) for k in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    int64_t kmin = hi ? std::max<int64_t>(1, -std::min<int64_t>(*hi, -1)) : 1;
    int64_t kmax = lo ? std::min(-*lo, big) : big;
    if (kmin <= kmax) alts.push_back("\"-\" " + nonneg_range(kmin, kmax));
  }
  if (!hi || *hi >= 0) {
    int64_t a = lo ? std::max<int64_t>(*lo, 0) : 0;
    int64_t b = hi ? std::min(*hi, big) : big;
    if (a <= b) alts.push_back(nonneg_range(a, b));
  }
  if (alts.empty()) return "";
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

}  // namespace nextn::grammar
