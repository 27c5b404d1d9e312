// grammar/gbnf.cc — the GBNF parser (see gbnf.h): text → rules of items, repetition
// rewritten into helper rules, then checked (undefined rules, left recursion) and
// flattened into a Grammar.
#include "grammar/gbnf.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

namespace nextn::grammar {

namespace {

// Limits that keep the parser's recursion shallow on hostile input (the expanded size is
// the caller's GrammarLimits::max_elements).
constexpr int kMaxNesting = 128;        // parentheses inside parentheses
constexpr int kMaxLeftCornerDepth = 1000;  // rules entered before a character must match

struct Item {
  bool is_rule = false;
  bool negated = false;
  std::vector<CharRange> ranges;
  int rule = -1;
};
using Sequence = std::vector<Item>;

struct RuleDef {
  std::string name;
  std::vector<Sequence> alts;
  bool defined = false;
  size_t defined_at = 0, first_use = 0;
  int owner = -1;  // helper rules (groups, repetitions): the rule whose text made them
};

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : s_(text), limits_(limits) {}

  Grammar parse(std::string_view root_name) {
    skip_space(true);
    while (p_ < s_.size()) {
      size_t at = p_;
      std::string name = parse_name();
      if (name.empty()) error(at, "expected a rule name");
      skip_space(false);
      if (s_.substr(p_, 3) != "::=") error(p_, "expected '::=' after rule name '" + name + "'");
      p_ += 3;
      skip_space(true);
      int r = rule_index(name, at);
      current_ = r;
      if (rules_[size_t(r)].defined) error(at, "rule '" + name + "' is defined twice");
      rules_[size_t(r)].defined = true;
      rules_[size_t(r)].defined_at = at;
      rules_[size_t(r)].alts = parse_alternates(false);
      if (p_ < s_.size() && s_[p_] != '\n' && s_[p_] != '\r') error(p_, "unexpected character");
      skip_space(true);
    }
    for (const RuleDef& r : rules_)
      if (!r.defined) error(r.first_use, "undefined rule '" + r.name + "'");
    auto root = names_.find(std::string(root_name));
    if (root == names_.end()) error(s_.size(), "no rule named '" + std::string(root_name) + "'");
    check_left_recursion();
    if (!derivable(&Parser::matches_a_character)[size_t(root->second)])
      error(0, "the grammar matches no string (every way through '" + std::string(root_name) +
                   "' needs a character that no UTF-8 text contains, such as a lone surrogate)");
    return flatten(root->second);
  }

 private:
  [[noreturn]] void error(size_t at, const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError(line, col, what);
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  void skip_space(bool newlines) {
    while (p_ < s_.size()) {
      char c = s_[p_];
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++p_;
      } else if (c == '#') {
        while (p_ < s_.size() && s_[p_] != '\n') ++p_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t b = p_;
    while (p_ < s_.size() && name_char(s_[p_])) ++p_;
    return std::string(s_.substr(b, p_ - b));
  }

  int rule_index(const std::string& name, size_t at) {
    auto it = names_.find(name);
    if (it != names_.end()) return it->second;
    int r = int(rules_.size());
    rules_.push_back({name, {}, false, at, at});
    names_[name] = r;
    return r;
  }

  int new_helper(const std::string& base) {
    std::string name;
    do name = base + "-" + std::to_string(++helpers_);
    while (names_.count(name));
    int r = rule_index(name, p_);
    rules_[size_t(r)].defined = true;
    rules_[size_t(r)].owner = current_;
    return r;
  }

  uint32_t hex(size_t at, int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (p_ >= s_.size()) error(at, "incomplete escape");
      char c = s_[p_++];
      int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (h < 0) error(p_ - 1, "expected a hex digit in escape");
      v = v * 16 + uint32_t(h);
    }
    return v;
  }

  // One character of a literal or class (escapes and UTF-8 decoded).
  uint32_t parse_char() {
    size_t at = p_;
    if (p_ >= s_.size()) error(at, "unexpected end of grammar");
    unsigned char c = static_cast<unsigned char>(s_[p_++]);
    if (c == '\\') {
      if (p_ >= s_.size()) error(at, "incomplete escape");
      char e = s_[p_++];
      switch (e) {
        case 'x': return hex(at, 2);
        case 'u': return hex(at, 4);
        case 'U': {
          uint32_t cp = hex(at, 8);
          if (cp > 0x10FFFF) error(at, "\\U escape past U+10FFFF, the last code point");
          return cp;
        }
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '.': case '*': case '+': case '?':
        case '(': case ')': case '|': case '{': case '}': case '/': case '\'':
          return uint32_t(e);
        default: error(at, std::string("unknown escape '\\") + e + "'");
      }
    }
    if (c < 0x80) return c;
    int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    if (extra < 0) error(at, "invalid UTF-8");
    uint32_t cp = c & (0x3F >> extra);
    for (int i = 0; i < extra; ++i) {
      if (p_ >= s_.size() || (static_cast<unsigned char>(s_[p_]) & 0xC0) != 0x80) error(at, "invalid UTF-8");
      cp = (cp << 6) | (static_cast<unsigned char>(s_[p_++]) & 0x3F);
    }
    if (cp > 0x10FFFF) error(at, "invalid UTF-8 (a code point past U+10FFFF)");
    return cp;
  }

  std::vector<Sequence> parse_alternates(bool nested) {
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(nested));
    while (p_ < s_.size() && s_[p_] == '|') {
      ++p_;
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  Sequence parse_sequence(bool nested) {
    Sequence seq;
    size_t last_start = 0;
    bool have_last = false;
    while (p_ < s_.size()) {
      char c = s_[p_];
      size_t at = p_;
      if (c == '"') {
        ++p_;
        last_start = seq.size();
        have_last = true;
        while (true) {
          if (p_ >= s_.size()) error(at, "unterminated string literal");
          if (s_[p_] == '"') break;
          if (s_[p_] == '\n') error(p_, "newline inside a string literal");
          size_t char_at = p_;
          uint32_t cp = parse_char();
          if (cp >= 0xD800 && cp <= 0xDFFF)
            error(char_at, "a lone UTF-16 surrogate is not a character: no UTF-8 text contains it");
          seq.push_back({false, false, {{cp, cp}}, -1});
        }
        ++p_;
        if (seq.size() == last_start) have_last = false;  // "" matches nothing to repeat
      } else if (c == '[') {
        ++p_;
        Item item;
        if (p_ < s_.size() && s_[p_] == '^') {
          item.negated = true;
          ++p_;
        }
        while (true) {
          if (p_ >= s_.size()) error(at, "unterminated character class");
          if (s_[p_] == ']') break;
          uint32_t lo = parse_char(), hi = lo;
          if (p_ + 1 < s_.size() && s_[p_] == '-' && s_[p_ + 1] != ']') {
            ++p_;
            hi = parse_char();
            if (hi < lo) error(at, "character range out of order");
          }
          item.ranges.push_back({lo, hi});
        }
        ++p_;
        last_start = seq.size();
        have_last = true;
        seq.push_back(std::move(item));
      } else if (c == '.') {
        ++p_;
        last_start = seq.size();
        have_last = true;
        seq.push_back({false, true, {}, -1});
      } else if (name_char(c)) {
        std::string name = parse_name();
        last_start = seq.size();
        have_last = true;
        Item item;
        item.is_rule = true;
        item.rule = rule_index(name, at);
        seq.push_back(item);
      } else if (c == '(') {
        ++p_;
        if (++nesting_ > kMaxNesting) error(at, "groups nested more than " + std::to_string(kMaxNesting) + " deep");
        skip_space(true);
        std::vector<Sequence> inner = parse_alternates(true);
        --nesting_;
        if (p_ >= s_.size() || s_[p_] != ')') error(at, "expected ')' to close this group");
        ++p_;
        int r = new_helper("group");
        rules_[size_t(r)].alts = std::move(inner);
        last_start = seq.size();
        have_last = true;
        Item item;
        item.is_rule = true;
        item.rule = r;
        seq.push_back(item);
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) error(at, std::string("'") + c + "' has nothing to repeat");
        ++p_;
        int min = 0, max = -1;  // max -1: unbounded
        if (c == '+') min = 1;
        if (c == '?') max = 1;
        if (c == '{') {
          skip_space(false);
          auto number = [&]() -> std::optional<int> {
            size_t b = p_;
            long v = 0;
            while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') {
              v = v * 10 + (s_[p_++] - '0');
              if (v > 10000) error(b, "repetition count too large (at most 10000)");
            }
            if (p_ == b) return std::nullopt;
            return int(v);
          };
          auto m = number();
          if (!m) error(p_, "expected a number in {m,n}");
          min = *m;
          max = *m;
          skip_space(false);
          if (p_ < s_.size() && s_[p_] == ',') {
            ++p_;
            skip_space(false);
            auto n = number();
            max = n ? *n : -1;
            if (n && *n < min) error(at, "repetition {m,n} with n < m");
          }
          skip_space(false);
          if (p_ >= s_.size() || s_[p_] != '}') error(p_, "expected '}'");
          ++p_;
        }
        Sequence body(seq.begin() + long(last_start), seq.end());
        seq.resize(last_start);
        seq.push_back(repeat(body, min, max));
        // A repetition can be repeated again: it is now one item.
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  // body{min,max} as one rule reference.
  Item repeat(const Sequence& body, int min, int max) {
    // {m,n} copies the body m + (n - m) times: nested counts multiply.
    items_ += body.size() * size_t(std::max(min, 1) + std::max(max - min, 0) + 1);
    if (items_ > limits_.max_elements)
      throw GrammarLimitError("the grammar grows past " + std::to_string(limits_.max_elements) +
                                  " elements once its repetitions are written out",
                              "--grammar-max-elements");
    Item ref;
    ref.is_rule = true;
    // The optional tail: opt_k ::= body opt_{k+1} | ε, or star ::= body star | ε.
    int tail = -1;
    if (max < 0) {
      tail = new_helper("star");
      Sequence again = body;
      Item self;
      self.is_rule = true;
      self.rule = tail;
      again.push_back(self);
      rules_[size_t(tail)].alts = {again, {}};
    } else {
      for (int k = 0; k < max - min; ++k) {
        int r = new_helper("opt");
        Sequence more = body;
        if (tail >= 0) {
          Item t;
          t.is_rule = true;
          t.rule = tail;
          more.push_back(t);
        }
        rules_[size_t(r)].alts = {more, {}};
        tail = r;
      }
    }
    Sequence all;
    for (int i = 0; i < min; ++i) all.insert(all.end(), body.begin(), body.end());
    if (tail >= 0) {
      Item t;
      t.is_rule = true;
      t.rule = tail;
      all.push_back(t);
    }
    int r = new_helper("rep");
    rules_[size_t(r)].alts = {all};
    ref.rule = r;
    return ref;
  }

  // Whether a character item can match a character of UTF-8 text: a code point up to
  // U+10FFFF that is not a UTF-16 surrogate.
  static bool matches_a_character(const Item& it) {
    auto covers = [&](uint32_t lo, uint32_t hi) {
      return ranges_match_some(it.ranges.data(), uint32_t(it.ranges.size()), it.negated, lo, hi);
    };
    return covers(0, 0xD7FF) || covers(0xE000, 0x10FFFF);
  }

  // Per rule: whether it derives a string made only of characters that `char_ok` accepts
  // (nullptr: none, so "derives the empty string"). A worklist over the rules that use
  // each rule, so long chains of helper rules ((a?){10000}) cost linear time.
  std::vector<bool> derivable(bool (*char_ok)(const Item&)) const {
    struct Alt {
      size_t rule;
      int missing;  // rule items not yet known derivable; -1: a character item refuses
    };
    std::vector<Alt> alts;
    std::vector<std::vector<size_t>> used_by(rules_.size());  // rule -> alternatives naming it
    std::vector<size_t> ready;
    for (size_t r = 0; r < rules_.size(); ++r)
      for (const Sequence& seq : rules_[r].alts) {
        Alt a{r, 0};
        for (const Item& it : seq) {
          if (it.is_rule) {
            a.missing += 1;
            used_by[size_t(it.rule)].push_back(alts.size());
          } else if (!char_ok || !char_ok(it)) {
            a.missing = -1;
            break;
          }
        }
        if (a.missing == 0) ready.push_back(r);
        alts.push_back(a);
      }
    std::vector<bool> yes(rules_.size(), false);
    while (!ready.empty()) {
      size_t r = ready.back();
      ready.pop_back();
      if (yes[r]) continue;
      yes[r] = true;
      for (size_t a : used_by[r])  // once per occurrence of r in the alternative
        if (alts[a].missing > 0 && --alts[a].missing == 0) ready.push_back(alts[a].rule);
    }
    return yes;
  }

  // A top-down matcher loops on a rule that can reach itself without consuming input.
  void check_left_recursion() {
    std::vector<bool> nullable = derivable(nullptr);
    std::vector<int> color(rules_.size(), 0);  // 0 new, 1 on the path, 2 done
    int depth = 0;
    std::function<void(size_t)> visit = [&](size_t r) {
      color[r] = 1;
      if (++depth > kMaxLeftCornerDepth) {
        size_t shown = rules_[r].owner >= 0 ? size_t(rules_[r].owner) : r;
        error(rules_[shown].defined_at, "rules nest more than " + std::to_string(kMaxLeftCornerDepth) +
                                            " deep before a character must match");
      }
      for (const Sequence& alt : rules_[r].alts)
        for (const Item& it : alt) {
          if (!it.is_rule) break;
          size_t c = size_t(it.rule);
          if (color[c] == 1) {
            size_t shown = rules_[c].owner >= 0 ? size_t(rules_[c].owner) : c;
            error(rules_[shown].defined_at,
                  "rule '" + rules_[shown].name +
                      "' is left-recursive (it can reach itself without matching a character, e.g. a "
                      "repetition of something that may be empty)");
          }
          if (color[c] == 0) visit(c);
          if (!nullable[c]) break;
        }
      color[r] = 2;
      --depth;
    };
    for (size_t r = 0; r < rules_.size(); ++r)
      if (color[r] == 0) visit(r);
  }

  Grammar flatten(int root) {
    Grammar g;
    g.root = root;
    for (const RuleDef& r : rules_) {
      g.rule_names.push_back(r.name);
      g.alternatives.emplace_back();
      for (const Sequence& alt : r.alts) {
        g.alternatives.back().push_back(uint32_t(g.elements.size()));
        for (const Item& it : alt) {
          Element e;
          if (it.is_rule) {
            e.kind = Element::Kind::kRule;
            e.rule = it.rule;
          } else {
            e.kind = Element::Kind::kChars;
            e.negated = it.negated;
            e.first_range = uint32_t(g.ranges.size());
            e.num_ranges = uint32_t(it.ranges.size());
            g.ranges.insert(g.ranges.end(), it.ranges.begin(), it.ranges.end());
          }
          g.elements.push_back(e);
        }
        g.elements.push_back(Element{});  // kEnd
      }
    }
    return g;
  }

  std::string_view s_;
  size_t p_ = 0;
  std::vector<RuleDef> rules_;
  std::map<std::string, int> names_;
  int helpers_ = 0;
  int current_ = -1;  // the rule being defined
  int nesting_ = 0;
  size_t items_ = 0;
  GrammarLimits limits_;
};

}  // namespace

bool ranges_match_some(const CharRange* ranges, uint32_t n, bool negated, uint32_t lo, uint32_t hi) {
  if (!negated) {
    for (uint32_t i = 0; i < n; ++i)
      if (ranges[i].lo <= hi && ranges[i].hi >= lo) return true;
    return false;
  }
  // Negated: some code point of [lo, hi] lies outside every range. Walk lo upwards past
  // ranges that cover it (ranges are few; repeat until no range covers lo).
  uint32_t x = lo;
  for (bool moved = true; moved && x <= hi;) {
    moved = false;
    for (uint32_t i = 0; i < n; ++i) {
      const CharRange& r = ranges[i];
      if (r.lo <= x && x <= r.hi) {
        if (r.hi >= hi) return false;
        x = r.hi + 1;
        moved = true;
      }
    }
  }
  return x <= hi;
}

bool Grammar::matches_some(const Element& e, uint32_t lo, uint32_t hi) const {
  return ranges_match_some(ranges.data() + e.first_range, e.num_ranges, e.negated, lo, hi);
}

Grammar parse_gbnf(std::string_view text, std::string_view root, const GrammarLimits& limits) {
  return Parser(text, limits).parse(root);
}

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hexd = "0123456789ABCDEF";
      out += "\\x";
      out += hexd[c >> 4];
      out += hexd[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

}  // namespace nextn::grammar
