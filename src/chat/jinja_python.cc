// chat/jinja_python.cc — the Python semantics Jinja values follow: str.strip/split/replace,
// slicing, comparison, len(), iteration, arithmetic and `in`.
#include "chat/jinja_python.h"

#include <charconv>
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tokenizer/normalizer.h"

namespace nextn::jinja {

[[noreturn]] void problem(std::string message) { throw RuntimeProblem{std::move(message)}; }

bool is_py_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

char32_t decode_cp(const std::string& ch) {
  unsigned char c = ch[0];
  if (c < 0x80) return c;
  int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
  char32_t cp = c & (0x3F >> n);
  for (int k = 1; k <= n && k < static_cast<int>(ch.size()); ++k) cp = (cp << 6) | (static_cast<unsigned char>(ch[k]) & 0x3F);
  return cp;
}

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto cs = utf8_chars(s);
  std::vector<std::string> set;
  bool use_set = chars && chars->is_string();
  if (use_set) set = utf8_chars(chars->str());
  auto strip_it = [&](const std::string& ch) {
    return use_set ? std::find(set.begin(), set.end(), ch) != set.end() : is_py_space(decode_cp(ch));
  };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strip_it(cs[b])) ++b;
  if (right)
    while (e > b && strip_it(cs[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cs[i];
  return out;
}

std::string py_lower(const std::string& s) { return unicode_lower(s); }
std::string py_upper(const std::string& s) { return unicode_upper(s); }

namespace {
// A split separator as Python takes it: a non-empty str (None is the whitespace split,
// handled by the callers).
const std::string& separator(const Value& sep) {
  if (!sep.is_string()) problem("must be str or None, not " + sep.type_name());
  if (sep.str().empty()) problem("empty separator");
  return sep.str();
}
}  // namespace

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep || sep->is_none()) {
    auto cs = utf8_chars(s);
    size_t i = 0;
    while (i < cs.size()) {
      while (i < cs.size() && is_py_space(decode_cp(cs[i]))) ++i;
      if (i >= cs.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        std::string rest;
        for (size_t k = i; k < cs.size(); ++k) rest += cs[k];
        // Python keeps the remainder as is (trailing whitespace stripped only by rsplit).
        out.push_back(rest);
        return out;
      }
      std::string word;
      while (i < cs.size() && !is_py_space(decode_cp(cs[i]))) word += cs[i++];
      out.push_back(word);
    }
    return out;
  }
  const std::string& d = separator(*sep);
  size_t pos = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) break;
    size_t f = s.find(d, pos);
    if (f == std::string::npos) break;
    out.push_back(s.substr(pos, f - pos));
    pos = f + d.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

std::vector<std::string> py_rsplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, -1);
  std::vector<std::string> rev;
  if (!sep || sep->is_none()) {
    // Words from the right; after maxsplit of them the rest, its leading whitespace kept
    // and its trailing whitespace stripped, as Python does.
    auto cs = utf8_chars(s);
    size_t end = cs.size();
    while (end > 0) {
      while (end > 0 && is_py_space(decode_cp(cs[end - 1]))) --end;
      if (end == 0) break;
      size_t begin = end;
      if (static_cast<int64_t>(rev.size()) >= maxsplit) begin = 0;
      else
        while (begin > 0 && !is_py_space(decode_cp(cs[begin - 1]))) --begin;
      std::string word;
      for (size_t k = begin; k < end; ++k) word += cs[k];
      rev.push_back(word);
      end = begin;
    }
    std::reverse(rev.begin(), rev.end());
    return rev;
  }
  const std::string& d = separator(*sep);
  size_t end = s.size();
  while (static_cast<int64_t>(rev.size()) < maxsplit) {
    if (end < d.size()) break;
    size_t f = s.rfind(d, end - d.size());
    if (f == std::string::npos) break;
    rev.push_back(s.substr(f + d.size(), end - f - d.size()));
    end = f;
  }
  rev.push_back(s.substr(0, end));
  std::reverse(rev.begin(), rev.end());
  return rev;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  if (from.empty()) {
    auto cs = utf8_chars(s);
    for (auto& c : cs) {
      if (count < 0 || n < count) { out += to; ++n; }
      out += c;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  while (count < 0 || n < count) {
    size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += to;
    pos = f + from.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// Python slice index adjustment.
std::vector<int64_t> slice_indices(int64_t len, const Value& start, const Value& stop, const Value& step_v) {
  int64_t step = step_v.is_undefined() || step_v.is_none() ? 1 : step_v.as_int();
  if (step == 0) problem("slice step cannot be zero");
  auto adjust = [&](const Value& v, int64_t def_pos, int64_t def_neg) -> int64_t {
    if (v.is_undefined() || v.is_none()) return step > 0 ? def_pos : def_neg;
    int64_t i = v.as_int();
    if (i < 0) {
      i += len;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= len) {
      i = step < 0 ? len - 1 : len;
    }
    return i;
  };
  int64_t b = adjust(start, 0, len - 1), e = adjust(stop, len, -1);
  std::vector<int64_t> out;
  if (step > 0)
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  else
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  return out;
}

int compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str() ? -1 : a.str() > b.str() ? 1 : 0;
  if (a.is_list() && b.is_list()) {
    for (size_t i = 0; i < std::min(a.list().size(), b.list().size()); ++i) {
      int c = compare_values(a.list()[i], b.list()[i]);
      if (c) return c;
    }
    return a.list().size() < b.list().size() ? -1 : a.list().size() > b.list().size() ? 1 : 0;
  }
  problem(fmt::format("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()));
}

int64_t length_of(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(utf8_chars(v.str()).size());
  if (v.is_list()) return static_cast<int64_t>(v.list().size());
  if (v.is_dict()) return static_cast<int64_t>(v.dict().items.size());
  if (v.is_undefined()) return 0;
  problem(fmt::format("object of type '{}' has no len()", v.type_name()));
}

// Iteration: lists, dict keys, string characters; undefined iterates as empty.
List iterate(const Value& v) {
  if (v.is_list()) return v.list();
  if (v.is_dict()) {
    List keys;
    for (auto& [k, _] : v.dict().items) keys.push_back(Value(k));
    return keys;
  }
  if (v.is_string()) {
    List chars;
    for (auto& c : utf8_chars(v.str())) chars.push_back(Value(c));
    return chars;
  }
  if (v.is_undefined() || v.is_none()) {
    if (v.is_none()) problem("'NoneType' object is not iterable");
    return {};
  }
  problem(fmt::format("'{}' object is not iterable", v.type_name()));
}

int64_t int_arg(const Args& a, size_t i, const std::string& name, int64_t def) {
  const Value* v = a.get(i, name);
  return v && !v->is_none() && !v->is_undefined() ? v->as_int() : def;
}

Value binary_arith(const std::string& op, const Value& a, const Value& b) {
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_list() && b.is_list()) {
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value(std::move(l));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) {
      int64_t n = b.as_int();
      if (a.is_string()) {
        std::string s;
        for (int64_t i = 0; i < n; ++i) s += a.str();
        return Value(s);
      }
      List l;
      for (int64_t i = 0; i < n; ++i) l.insert(l.end(), a.list().begin(), a.list().end());
      return Value(std::move(l));
    }
    if (a.is_int() && (b.is_string() || b.is_list())) return binary_arith(op, b, a);
  }
  if (a.is_undefined() || b.is_undefined()) problem("undefined value in arithmetic");
  if (!a.is_number() || !b.is_number())
    problem(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
  bool ints = !a.is_float() && !b.is_float();
  if (op == "/") {
    if (b.as_float() == 0) problem("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (ints) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    // Python integers never overflow; ours are 64-bit, so overflow is an error rather
    // than a silently wrapped (and undefined) result.
    if (op == "+" || op == "-" || op == "*") {
      bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                      : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                  : __builtin_mul_overflow(x, y, &r);
      if (overflow) problem(fmt::format("integer overflow in {}", op));
      return Value(r);
    }
    if (op == "//" || op == "%") {
      if (y == 0) problem("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) problem("integer overflow in " + op);
      int64_t q = x / y;
      r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) { --q; r += y; }
      return Value(op == "//" ? q : r);
    }
    if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1, base = x;
      for (int64_t e = y; e > 0; e >>= 1) {  // square and multiply: at most 63 rounds
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) problem("integer overflow in **");
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) problem("integer overflow in **");
      }
      return Value(result);
    }
  }
  double x = a.as_float(), y = b.as_float();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "//") { if (y == 0) problem("float floor division by zero"); return Value(std::floor(x / y)); }
  if (op == "%") { if (y == 0) problem("float modulo"); double r = std::fmod(x, y); if (r != 0 && ((r < 0) != (y < 0))) r += y; return Value(r); }
  if (op == "**") return Value(std::pow(x, y));
  problem("unknown operator " + op);
}

bool python_contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) problem("'in <string>' requires string as left operand");
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_list()) {
    for (auto& e : container.list())
      if (e == item) return true;
    return false;
  }
  if (container.is_dict()) return item.is_string() && container.dict().find(item.str()) != nullptr;
  if (container.is_undefined()) problem("argument of type 'Undefined' is not iterable");
  problem(fmt::format("argument of type '{}' is not iterable", container.type_name()));
}

Value attribute_of(const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (cur.is_dict()) {
      const Value* x = cur.dict().find(part);
      cur = x ? *x : Value();
    } else if (cur.is_list() && !part.empty() && isdigit(static_cast<unsigned char>(part[0]))) {
      size_t i = SIZE_MAX;  // an index too large for size_t is simply missing
      std::from_chars(part.data(), part.data() + part.size(), i);
      cur = i < cur.list().size() ? cur.list()[i] : Value();
    } else {
      cur = Value();
    }
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

}  // namespace nextn::jinja
