// grammar/pattern.cc — see pattern.h. A recursive-descent pass over the regex that
// writes the GBNF expression directly.
#include "grammar/pattern.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/grammar.h"

namespace nextn::grammar {

namespace {

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// One character as it is written inside a JSON string.
std::string json_char(uint32_t cp) {
  if (cp == '"') return gbnf_literal("\\\"");
  if (cp == '\\') return gbnf_literal("\\\\");
  if (cp == '\n') return gbnf_literal("\\n");
  if (cp == '\t') return gbnf_literal("\\t");
  if (cp == '\r') return gbnf_literal("\\r");
  if (cp < 0x20 || cp == 0x7F) return gbnf_literal(fmt::format("\\u{:04x}", cp));
  return gbnf_literal(utf8_of(cp));
}

struct CharSet {
  std::vector<CharRange> ranges;
  bool negated = false;
  bool contains(uint32_t cp) const {
    bool in = false;
    for (const CharRange& r : ranges) in |= cp >= r.lo && cp <= r.hi;
    return in != negated;
  }
};

// The set as JSON string content: raw characters except controls, " and \ (which come
// out escaped as alternatives).
std::string json_class(const CharSet& set) {
  auto hex = [](uint32_t cp) { return fmt::format("\\U{:08X}", cp); };
  std::vector<std::string> alts;
  std::string cls;
  if (set.negated) {
    cls = "[^\\x00-\\x1F\\x7F\\\"\\\\";
    for (const CharRange& r : set.ranges) cls += hex(r.lo) + "-" + hex(r.hi);
    cls += "]";
    alts.push_back(cls);
  } else {
    std::string inner;
    for (const CharRange& r : set.ranges) {
      // Split each range around the characters that need escaping.
      uint32_t lo = r.lo;
      auto emit = [&](uint32_t a, uint32_t b) {
        if (a <= b) inner += hex(a) + "-" + hex(b);
      };
      std::vector<uint32_t> cuts;
      for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x7F); ++c)
        if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') cuts.push_back(c);
      for (uint32_t c : cuts) {
        if (c > lo) emit(lo, c - 1);
        lo = c + 1;
      }
      if (lo <= r.hi) emit(lo, r.hi);
    }
    if (!inner.empty()) alts.push_back("[" + inner + "]");
  }
  if (set.contains('"')) alts.push_back(json_char('"'));
  if (set.contains('\\')) alts.push_back(json_char('\\'));
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

class PatternParser {
 public:
  explicit PatternParser(std::string_view p) : s_(p) {}

  std::string parse() {
    if (!s_.empty() && s_[0] == '^') ++p_;
    std::string out = alternation();
    if (p_ < s_.size() && s_[p_] == '$' && p_ + 1 == s_.size()) ++p_;
    if (p_ < s_.size()) {
      if (s_[p_] == ')') error("unbalanced ')'");
      if (s_[p_] == '$' || s_[p_] == '^') error("anchors are supported only at the start (^) and the end ($)");
      error(fmt::format("unexpected '{}'", s_[p_]));
    }
    return out.empty() ? "\"\"" : out;
  }

 private:
  [[noreturn]] void error(const std::string& what) const { throw PatternError(p_, what); }

  uint32_t next_cp() {
    unsigned char c = static_cast<unsigned char>(s_[p_++]);
    if (c < 0x80) return c;
    int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    uint32_t cp = c & (0x3F >> extra);
    for (int i = 0; i < extra && p_ < s_.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(s_[p_++]) & 0x3F);
    return cp;
  }

  std::string alternation() {
    std::vector<std::string> alts{concatenation()};
    while (p_ < s_.size() && s_[p_] == '|') {
      ++p_;
      alts.push_back(concatenation());
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + (alts[i].empty() ? "\"\"" : alts[i]);
    return out + ")";
  }

  std::string concatenation() {
    std::string out;
    while (p_ < s_.size() && s_[p_] != '|' && s_[p_] != ')') {
      if (s_[p_] == '$' && p_ + 1 == s_.size()) break;
      size_t at = p_;
      std::string a = atom();
      if (a.empty()) {
        p_ = at;
        error("this class matches no character that a JSON string can hold");
      }
      const std::string q = quantifier();
      if (a != "\"\"") a += q;  // an empty group repeated is still empty (GBNF cannot repeat "")
      out += (out.empty() ? "" : " ") + a;
    }
    return out;
  }

  std::string quantifier() {
    if (p_ >= s_.size()) return "";
    char c = s_[p_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      ++p_;
      q = std::string(1, c);
    } else if (c == '{') {
      size_t close = s_.find('}', p_);
      if (close == std::string_view::npos) error("unterminated {m,n}");
      std::string body(s_.substr(p_ + 1, close - p_ - 1));
      size_t comma = body.find(',');
      auto number = [&](const std::string& digits) -> long {
        if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos)
          error("bad repetition {" + body + "}");
        long v = std::stol(digits);
        if (v > 10000) error("repetition counts above 10000 are not supported");
        return v;
      };
      long lo = number(comma == std::string::npos ? body : body.substr(0, comma));
      if (comma == std::string::npos) {
        q = fmt::format("{{{}}}", lo);
      } else if (comma + 1 == body.size()) {
        q = fmt::format("{{{},}}", lo);
      } else {
        long hi = number(body.substr(comma + 1));
        if (hi < lo) error("repetition {" + body + "} has its maximum below its minimum");
        q = fmt::format("{{{},{}}}", lo, hi);
      }
      p_ = close + 1;
    } else {
      return "";
    }
    if (p_ < s_.size() && s_[p_] == '?') ++p_;  // lazy: same language
    if (p_ < s_.size() && (s_[p_] == '*' || s_[p_] == '+' || s_[p_] == '{')) error("nested quantifier");
    return q;
  }

  std::string group_of(std::string body) { return body.empty() ? "\"\"" : "(" + body + ")"; }

  std::string atom() {
    size_t at = p_;
    char c = s_[p_];
    if (c == '(') {
      ++p_;
      if (++nesting_ > 128) error("groups nested more than 128 deep");
      if (p_ < s_.size() && s_[p_] == '?') {
        if (p_ + 1 < s_.size() && s_[p_ + 1] == ':') {
          p_ += 2;
        } else {
          error("group syntax (?...) other than (?:...) is not supported (lookaround, named groups, flags)");
        }
      }
      std::string inner = alternation();
      if (p_ >= s_.size() || s_[p_] != ')') {
        p_ = at;
        error("unclosed '('");
      }
      ++p_;
      --nesting_;
      return group_of(inner);
    }
    if (c == '[') return json_class(char_class());
    if (c == '.') {
      ++p_;
      return json_class(CharSet{{{'\n', '\n'}}, true});
    }
    if (c == '\\') return escape_atom();
    if (c == '*' || c == '+' || c == '?' || c == '{') error(fmt::format("'{}' has nothing to repeat", c));
    if (c == '^' || c == '$') error("anchors are supported only at the start (^) and the end ($)");
    return json_char(next_cp());
  }

  // \d \w \s and their negations as sets; other escapes as one character (set = false).
  bool class_escape(CharSet& set, uint32_t& single) {
    ++p_;  // the backslash
    if (p_ >= s_.size()) error("pattern ends with a backslash");
    char e = s_[p_++];
    switch (e) {
      case 'd': set = {{{'0', '9'}}, false}; return true;
      case 'D': set = {{{'0', '9'}}, true}; return true;
      case 'w': set = {{{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'_', '_'}}, false}; return true;
      case 'W': set = {{{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'_', '_'}}, true}; return true;
      case 's': set = {{{' ', ' '}}, false}; return true;
      case 'S': set = {{{' ', ' '}, {'\t', '\r'}}, true}; return true;
      case 'n': single = '\n'; return false;
      case 't': single = '\t'; return false;
      case 'r': single = '\r'; return false;
      case 'x': case 'u': {
        int n = e == 'x' ? 2 : 4;
        const std::string hex(s_.substr(p_, std::min(size_t(n), s_.size() - p_)));
        if (hex.size() != size_t(n) || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
          error(fmt::format("\\{} needs {} hex digits", e, n));
        single = uint32_t(std::stoul(hex, nullptr, 16));
        p_ += size_t(n);
        return false;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
          --p_;
          error(fmt::format("escape \\{} is not supported", e));
        }
        single = static_cast<unsigned char>(e);
        return false;
    }
  }

  std::string escape_atom() {
    CharSet set;
    uint32_t single = 0;
    if (class_escape(set, single)) return json_class(set);
    return json_char(single);
  }

  CharSet char_class() {
    size_t at = p_;
    ++p_;  // [
    CharSet set;
    if (p_ < s_.size() && s_[p_] == '^') {
      set.negated = true;
      ++p_;
    }
    bool first = true;
    while (true) {
      if (p_ >= s_.size()) {
        p_ = at;
        error("unterminated character class");
      }
      if (s_[p_] == ']' && !first) break;
      first = false;
      uint32_t lo;
      if (s_[p_] == '\\') {
        CharSet inner;
        if (class_escape(inner, lo)) {
          if (inner.negated) error("negated escapes (\\D \\W \\S) inside a class are not supported");
          set.ranges.insert(set.ranges.end(), inner.ranges.begin(), inner.ranges.end());
          continue;
        }
      } else {
        lo = next_cp();
      }
      uint32_t hi = lo;
      if (p_ + 1 < s_.size() && s_[p_] == '-' && s_[p_ + 1] != ']') {
        ++p_;
        if (s_[p_] == '\\') {
          CharSet inner;
          if (class_escape(inner, hi)) error("a class escape cannot end a range");
        } else {
          hi = next_cp();
        }
        if (hi < lo) error("character range out of order");
      }
      set.ranges.push_back({lo, hi});
    }
    ++p_;
    return set;
  }

  std::string_view s_;
  size_t p_ = 0;
  int nesting_ = 0;
};

}  // namespace

std::string pattern_to_gbnf(std::string_view pattern) { return PatternParser(pattern).parse(); }

}  // namespace nextn::grammar
