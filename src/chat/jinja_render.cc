// chat/jinja_render.cc — the Jinja evaluator: scopes, statements, operators, Python
// str/dict/list methods, filters, tests and the globals transformers provides.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>

#include <unicode/uchar.h>

#include "chat/jinja.h"
#include "tokenizer/normalizer.h"
#include "util/error.h"

namespace nextn::jinja {

namespace {

// Thrown by builtins; rethrown as nextn::Error with the call's line/column.
struct RuntimeProblem {
  std::string message;
};

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

std::string ascii_lower(const std::string& s) { return unicode_lower(s); }  // Python str.lower()
std::string ascii_upper(const std::string& s) { return unicode_upper(s); }  // Python str.upper()

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
  if (!sep->is_string() || sep->str().empty()) problem("empty separator");
  const std::string& d = sep->str();
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
  if (!sep || sep->is_none()) {
    // Rare; approximate with a full split then rejoin the head.
    auto all = py_split(s, sep, -1);
    if (static_cast<int64_t>(all.size()) <= maxsplit + 1) return all;
    std::vector<std::string> out;
    std::string head;
    size_t cut = all.size() - static_cast<size_t>(maxsplit);
    for (size_t i = 0; i < cut; ++i) head += (i ? " " : "") + all[i];
    out.push_back(head);
    out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(cut), all.end());
    return out;
  }
  const std::string& d = sep->str();
  std::vector<std::string> rev;
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

Value make_method(std::string name, Function f) { return Value::function(std::move(f), std::move(name)); }

int64_t int_arg(const Args& a, size_t i, const std::string& name, int64_t def) {
  const Value* v = a.get(i, name);
  return v && !v->is_none() && !v->is_undefined() ? v->as_int() : def;
}

Value string_method(const std::string& s, const std::string& name) {
  auto m = [&](Function f) { return make_method(name, std::move(f)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return m([s, name](Args& a) {
      return Value(py_strip(s, a.get(0, "chars"), name != "rstrip", name != "lstrip"));
    });
  if (name == "split")
    return m([s](Args& a) {
      List l;
      for (auto& p : py_split(s, a.get(0, "sep"), int_arg(a, 1, "maxsplit", -1))) l.push_back(Value(p));
      return Value(std::move(l));
    });
  if (name == "rsplit")
    return m([s](Args& a) {
      List l;
      for (auto& p : py_rsplit(s, a.get(0, "sep"), int_arg(a, 1, "maxsplit", -1))) l.push_back(Value(p));
      return Value(std::move(l));
    });
  if (name == "splitlines")
    return m([s](Args&) {
      List l;
      size_t pos = 0;
      while (pos < s.size()) {
        size_t f = s.find_first_of("\r\n", pos);
        if (f == std::string::npos) { l.push_back(Value(s.substr(pos))); break; }
        l.push_back(Value(s.substr(pos, f - pos)));
        pos = f + ((s[f] == '\r' && f + 1 < s.size() && s[f + 1] == '\n') ? 2 : 1);
      }
      return Value(std::move(l));
    });
  if (name == "startswith" || name == "endswith")
    return m([s, name](Args& a) {
      const Value* p = a.get(0, "prefix");
      if (!p) problem(name + "() takes at least 1 argument");
      List cands = p->is_list() ? p->list() : List{*p};
      for (auto& c : cands) {
        if (!c.is_string()) problem(name + " first arg must be str or a tuple of str");
        const std::string& x = c.str();
        bool ok = name == "startswith" ? s.compare(0, x.size(), x) == 0
                                       : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
        if (ok) return Value(true);
      }
      return Value(false);
    });
  if (name == "replace")
    return m([s](Args& a) {
      const Value* f = a.get(0, "old");
      const Value* t = a.get(1, "new");
      if (!f || !t || !f->is_string() || !t->is_string()) problem("replace() arguments must be str");
      return Value(py_replace(s, f->str(), t->str(), int_arg(a, 2, "count", -1)));
    });
  if (name == "lower") return m([s](Args&) { return Value(ascii_lower(s)); });
  if (name == "upper") return m([s](Args&) { return Value(ascii_upper(s)); });
  if (name == "capitalize") return m([s](Args&) { return Value(unicode_capitalize(s)); });
  if (name == "title") return m([s](Args&) { return Value(unicode_title(s)); });
  if (name == "find" || name == "rfind" || name == "index" || name == "count")
    return m([s, name](Args& a) {
      const Value* x = a.get(0, "sub");
      if (!x || !x->is_string()) problem(name + "() argument must be str");
      if (name == "count") {
        if (x->str().empty()) return Value(static_cast<int64_t>(utf8_chars(s).size() + 1));
        int64_t n = 0;
        for (size_t p = s.find(x->str()); p != std::string::npos; p = s.find(x->str(), p + x->str().size())) ++n;
        return Value(n);
      }
      size_t p = name == "rfind" ? s.rfind(x->str()) : s.find(x->str());
      if (p == std::string::npos) {
        if (name == "index") problem("substring not found");
        return Value(static_cast<int64_t>(-1));
      }
      return Value(static_cast<int64_t>(utf8_chars(s.substr(0, p)).size()));
    });
  if (name == "join")
    return m([s](Args& a) {
      const Value* x = a.get(0, "iterable");
      if (!x) problem("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (auto& e : iterate(*x)) {
        if (!e.is_string()) problem("sequence item: expected str instance");
        out += (first ? "" : s) + e.str();
        first = false;
      }
      return Value(out);
    });
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper")
    return m([s, name](Args&) {
      if (s.empty()) return Value(false);
      bool cased = false;
      for (unsigned char c : s) {
        if (name == "isdigit" && !isdigit(c)) return Value(false);
        if (name == "isalpha" && !isalpha(c)) return Value(false);
        if (name == "isalnum" && !isalnum(c)) return Value(false);
        if (name == "isspace" && !isspace(c)) return Value(false);
        if (name == "islower" && isupper(c)) return Value(false);
        if (name == "isupper" && islower(c)) return Value(false);
        cased = cased || isalpha(c);
      }
      return Value(name == "islower" || name == "isupper" ? cased : true);
    });
  if (name == "format")
    return m([s](Args& a) {
      std::string out;
      size_t auto_index = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') { out += '{'; ++i; continue; }
        if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') { out += '}'; ++i; continue; }
        if (s[i] != '{') { out += s[i]; continue; }
        size_t close = s.find('}', i);
        if (close == std::string::npos) problem("Single '{' encountered in format string");
        std::string field = s.substr(i + 1, close - i - 1);
        const Value* v = nullptr;
        if (field.empty()) v = auto_index < a.positional.size() ? &a.positional[auto_index++] : nullptr;
        else if (isdigit(static_cast<unsigned char>(field[0]))) {
          size_t k = SIZE_MAX;
          std::from_chars(field.data(), field.data() + field.size(), k);
          v = k < a.positional.size() ? &a.positional[k] : nullptr;
        } else v = a.kw(field);
        if (!v) problem("format(): missing argument");
        out += v->to_str();
        i = close;
      }
      return Value(out);
    });
  return Value();
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items")
    return make_method(name, [d](Args&) {
      List l;
      for (auto& [k, v] : d.dict().items) l.push_back(Value::tuple(List{Value(k), v}));
      return Value(std::move(l));
    });
  if (name == "keys")
    return make_method(name, [d](Args&) {
      List l;
      for (auto& [k, v] : d.dict().items) l.push_back(Value(k));
      return Value(std::move(l));
    });
  if (name == "values")
    return make_method(name, [d](Args&) {
      List l;
      for (auto& [k, v] : d.dict().items) l.push_back(v);
      return Value(std::move(l));
    });
  if (name == "get")
    return make_method(name, [d](Args& a) {
      const Value* k = a.get(0, "key");
      if (!k) problem("get expected at least 1 argument");
      const Value* v = k->is_string() ? d.dict().find(k->str()) : nullptr;
      if (v) return *v;
      const Value* def = a.get(1, "default");
      return def ? *def : Value::none();
    });
  return Value();
}

Value list_method(const Value& l, const std::string& name) {
  if (name == "index")
    return make_method(name, [l](Args& a) {
      const Value* x = a.get(0, "value");
      for (size_t i = 0; x && i < l.list().size(); ++i)
        if (l.list()[i] == *x) return Value(static_cast<int64_t>(i));
      problem("value is not in list");
    });
  if (name == "count")
    return make_method(name, [l](Args& a) {
      const Value* x = a.get(0, "value");
      int64_t n = 0;
      for (auto& e : l.list()) n += x && e == *x;
      return Value(n);
    });
  if (name == "append" || name == "pop" || name == "extend" || name == "insert" || name == "remove" ||
      name == "clear" || name == "sort" || name == "reverse")
    return make_method(name, [name](Args&) -> Value {
      problem(fmt::format("access to attribute '{}' of 'list' object is unsafe.", name));
    });
  return Value();
}

class Renderer;

struct Frame {
  std::map<std::string, Value> vars;
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const std::map<std::string, Value>& variables, const RenderLimits& limits)
      : limits_(limits), start_(std::chrono::steady_clock::now()) {
    frames_.emplace_back();
    install_globals();
    frames_.emplace_back();
    for (auto& [k, v] : variables) frames_.back().vars[k] = v;
  }

  void exec(const Body& body, std::string& out) {
    Flow f = exec_body(body, out);
    (void)f;
  }

 private:
  std::vector<Frame> frames_;
  const RenderLimits& limits_;
  std::chrono::steady_clock::time_point start_;
  int64_t steps_ = 0;
  int depth_ = 0;

  // One unit of work (a statement, an expression, a copied item). The clock and the
  // cancel flag are read every 1024 units: cheap, and still within milliseconds.
  void charge(int64_t units = 1) {
    steps_ += units;
    if (steps_ > limits_.max_steps)
      problem(fmt::format("render limit: more than {} evaluation steps (max_steps)", limits_.max_steps));
    if ((steps_ & 1023) < units || units > 1023) {
      if (limits_.cancel && limits_.cancel->load(std::memory_order_relaxed)) problem("render cancelled (shutdown)");
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      if (elapsed > limits_.max_seconds)
        problem(fmt::format("render limit: took longer than {} s (max_seconds)", limits_.max_seconds));
    }
  }
  void check_size(size_t bytes) const {
    if (bytes > limits_.max_output_bytes)
      problem(fmt::format("render limit: a string or the output would exceed {} bytes (max_output_bytes)",
                          limits_.max_output_bytes));
  }
  const Value& bounded(const Value& v) const {
    if (v.is_string()) check_size(v.str().size());
    return v;
  }
  // Entered by every nested block, macro call and sub-expression: deep recursion ends
  // with an error long before the thread's stack runs out.
  struct Nested {
    Renderer& r;
    explicit Nested(Renderer& renderer) : r(renderer) {
      if (++r.depth_ > r.limits_.max_depth) {
        --r.depth_;
        problem(fmt::format("render limit: nesting deeper than {} (max_depth; a recursive macro?)", r.limits_.max_depth));
      }
    }
    ~Nested() { --r.depth_; }
  };

  [[noreturn]] void error_at(int line, int col, const std::string& msg) const {
    fail(ErrorKind::kBadInput, "chat template: line {}, column {}: {}", line, col, msg);
  }

  void install_globals() {
    auto& g = frames_.back().vars;
    g["range"] = Value::function(
        [this](Args& a) {
          int64_t start = 0, stop = 0, step = 1;
          if (a.positional.size() == 1) stop = a.positional[0].as_int();
          else if (a.positional.size() >= 2) {
            start = a.positional[0].as_int();
            stop = a.positional[1].as_int();
            if (a.positional.size() >= 3) step = a.positional[2].as_int();
          } else problem("range expected at least 1 argument");
          if (step == 0) problem("range() arg 3 must not be zero");
          List l;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            charge();
            l.push_back(Value(i));
            if (step > 0 ? i > INT64_MAX - step : i < INT64_MIN - step) break;
          }
          return Value(std::move(l));
        },
        "range");
    g["namespace"] = Value::function(
        [](Args& a) {
          Dict d;
          d.is_namespace = true;
          for (auto& p : a.positional)
            if (p.is_dict())
              for (auto& [k, v] : p.dict().items) d.set(k, v);
          for (auto& [k, v] : a.keyword) d.set(k, v);
          return Value(std::move(d));
        },
        "namespace");
    g["dict"] = Value::function(
        [](Args& a) {
          Dict d;
          for (auto& p : a.positional)
            if (p.is_dict())
              for (auto& [k, v] : p.dict().items) d.set(k, v);
          for (auto& [k, v] : a.keyword) d.set(k, v);
          return Value(std::move(d));
        },
        "dict");
    g["raise_exception"] = Value::function(
        [](Args& a) -> Value { problem(a.positional.empty() ? std::string("raise_exception") : a.positional[0].to_str()); },
        "raise_exception");
    g["strftime_now"] = Value::function(
        [](Args& a) {
          std::string format = a.positional.empty() ? std::string("%Y-%m-%d") : a.positional[0].to_str();
          std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[512];
          size_t n = std::strftime(buf, sizeof buf, format.c_str(), &tm);
          return Value(std::string(buf, n));
        },
        "strftime_now");
  }

  Value lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto f = it->vars.find(name);
      if (f != it->vars.end()) return f->second;
    }
    return Value();
  }

  void assign(const std::string& name, Value v) { frames_.back().vars[name] = std::move(v); }

  Flow exec_body(const Body& body, std::string& out) {
    Nested nested(*this);
    for (auto& n : body) {
      Flow f = exec_node(*n, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  void assign_targets(const std::vector<std::string>& targets, const Value& v, int line, int col) {
    if (targets.size() == 1) {
      assign(targets[0], v);
      return;
    }
    List items;
    try {
      items = iterate(v);
    } catch (const RuntimeProblem& p) {
      error_at(line, col, p.message);
    }
    if (items.size() != targets.size())
      error_at(line, col, fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
    for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], items[i]);
  }

  void emit(std::string& out, const std::string& text, const Node& n) {
    if (out.size() + text.size() > limits_.max_output_bytes) {
      try {
        check_size(out.size() + text.size());
      } catch (const RuntimeProblem& p) {
        error_at(n.line, n.col, p.message);
      }
    }
    out += text;
  }

  Flow exec_node(const Node& n, std::string& out) {
    try {
      charge();
    } catch (const RuntimeProblem& p) {
      error_at(n.line, n.col, p.message);
    }
    switch (n.kind) {
      case Node::Kind::kText: emit(out, n.text, n); return Flow::kNormal;
      case Node::Kind::kOutput: emit(out, eval(*n.expr).to_str(), n); return Flow::kNormal;
      case Node::Kind::kIf:
        for (auto& [cond, body] : n.branches)
          if (eval(*cond).truthy()) return exec_body(body, out);
        return exec_body(n.else_body, out);
      case Node::Kind::kFor: return exec_for(n, out);
      case Node::Kind::kSet: {
        Value v = eval(*n.expr);
        if (n.target_object) {
          Value obj = eval(*n.target_object);
          if (!obj.is_dict() || !obj.dict().is_namespace)
            error_at(n.line, n.col, "can only assign attributes of namespace() objects");
          obj.dict().set(n.targets[0], std::move(v));
        } else {
          assign_targets(n.targets, v, n.line, n.col);
        }
        return Flow::kNormal;
      }
      case Node::Kind::kSetBlock: {
        std::string captured;
        exec_body(n.body, captured);
        assign(n.targets[0], Value(captured));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: define_macro(n); return Flow::kNormal;
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
      case Node::Kind::kFilterBlock: {
        std::string captured;
        exec_body(n.body, captured);
        emit(out, apply_filter(*n.expr, Value(captured)).to_str(), n);
        return Flow::kNormal;
      }
      case Node::Kind::kPlain: return exec_body(n.body, out);
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Node& n, std::string& out) {
    Value iterable = eval(*n.expr);
    List items;
    try {
      items = iterate(iterable);
    } catch (const RuntimeProblem& p) {
      error_at(n.expr->line, n.expr->col, p.message);
    }
    frames_.emplace_back();
    if (n.condition) {
      List kept;
      for (auto& it : items) {
        assign_targets(n.targets, it, n.line, n.col);
        if (eval(*n.condition).truthy()) kept.push_back(it);
      }
      items = std::move(kept);
    }
    int64_t len = static_cast<int64_t>(items.size());
    bool completed_one = false;
    for (int64_t i = 0; i < len; ++i) {
      Dict loop;
      loop.set("index0", Value(i));
      loop.set("index", Value(i + 1));
      loop.set("revindex", Value(len - i));
      loop.set("revindex0", Value(len - i - 1));
      loop.set("first", Value(i == 0));
      loop.set("last", Value(i == len - 1));
      loop.set("length", Value(len));
      loop.set("depth", Value(static_cast<int64_t>(1)));
      loop.set("depth0", Value(static_cast<int64_t>(0)));
      loop.set("previtem", i > 0 ? items[i - 1] : Value());
      loop.set("nextitem", i + 1 < len ? items[i + 1] : Value());
      loop.set("cycle", Value::function(
                            [i](Args& a) -> Value {
                              if (a.positional.empty()) problem("no items for cycling given");
                              return a.positional[static_cast<size_t>(i) % a.positional.size()];
                            },
                            "cycle"));
      assign("loop", Value(std::move(loop)));
      assign_targets(n.targets, items[i], n.line, n.col);
      Flow f = exec_body(n.body, out);
      if (f == Flow::kBreak) break;
      if (f == Flow::kNormal) completed_one = true;
    }
    frames_.pop_back();
    // Jinja2 quirk: the else block runs unless some iteration reached the end of the body
    // (an iteration left with continue/break does not count).
    if (!completed_one) return exec_body(n.else_body, out);
    return Flow::kNormal;
  }

  void define_macro(const Node& n) {
    const Node* node = &n;
    Value fn = Value::function(
        [this, node](Args& a) -> Value {
          // Macros see the template's globals and top-level variables, plus their parameters.
          std::vector<Frame> saved;
          saved.swap(frames_);
          frames_.push_back(saved[0]);
          frames_.push_back(saved[1]);
          frames_.emplace_back();
          try {
            for (size_t i = 0; i < node->targets.size(); ++i) {
              const Value* v = a.get(i, node->targets[i]);
              if (v) assign(node->targets[i], *v);
              else if (node->defaults[i]) assign(node->targets[i], eval(*node->defaults[i]));
              else assign(node->targets[i], Value());
            }
            std::string out;
            exec_body(node->body, out);
            frames_.swap(saved);
            return Value(out);
          } catch (...) {
            frames_.swap(saved);
            throw;
          }
        },
        n.name);
    assign(n.name, fn);
  }

  Value get_attr(const Value& obj, const std::string& name, const Expr& e) {
    if (obj.is_undefined()) error_at(e.line, e.col, fmt::format("'{}' is undefined", describe(e)));
    if (obj.is_dict()) {
      Value m = obj.dict().is_namespace ? Value() : dict_method(obj, name);
      if (!m.is_undefined()) return m;
      const Value* v = obj.dict().find(name);
      return v ? *v : Value();
    }
    if (obj.is_string()) return string_method(obj.str(), name);
    if (obj.is_list()) return list_method(obj, name);
    return Value();
  }

  Value get_item(const Value& obj, const Value& key, const Expr& e) {
    if (obj.is_undefined()) error_at(e.line, e.col, fmt::format("'{}' is undefined", describe(e)));
    if (obj.is_dict()) {
      if (key.is_string()) {
        const Value* v = obj.dict().find(key.str());
        if (v) return *v;
        return obj.dict().is_namespace ? Value() : dict_method(obj, key.str());
      }
      return Value();
    }
    if (obj.is_list() || obj.is_string()) {
      if (key.is_string()) return get_attr(obj, key.str(), e);
      if (!key.is_int() && !key.is_bool()) return Value();
      int64_t i = key.as_int();
      if (obj.is_list()) {
        int64_t n = static_cast<int64_t>(obj.list().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value();
        return obj.list()[static_cast<size_t>(i)];
      }
      auto cs = utf8_chars(obj.str());
      int64_t n = static_cast<int64_t>(cs.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return Value(cs[static_cast<size_t>(i)]);
    }
    return Value();
  }

  static std::string describe(const Expr& e) {
    if (e.kind == Expr::Kind::kName) return e.name;
    if (e.kind == Expr::Kind::kAttr && !e.children.empty()) return describe(*e.children[0]) + "." + e.name;
    if (e.kind == Expr::Kind::kIndex && !e.children.empty()) return describe(*e.children[0]) + "[...]";
    return "value";
  }

  Args eval_args(const Expr& e, size_t first) {
    Args a;
    for (size_t i = first; i < e.children.size(); ++i) {
      const std::string& kw = e.kwnames[i - first];
      if (kw.empty()) a.positional.push_back(eval(*e.children[i]));
      else a.keyword.emplace_back(kw, eval(*e.children[i]));
    }
    return a;
  }

  Value eval(const Expr& e) {
    try {
      Nested nested(*this);
      charge();
      Value v = eval_inner(e);
      bounded(v);
      return v;
    } catch (const RuntimeProblem& p) {
      error_at(e.line, e.col, p.message);
    }
  }

  Value arith(const std::string& op, const Value& a, const Value& b) {
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        check_size(a.str().size() + b.str().size());
        return Value(a.str() + b.str());
      }
      if (a.is_list() && b.is_list()) {
        charge(static_cast<int64_t>(a.list().size() + b.list().size()));
        List l = a.list();
        l.insert(l.end(), b.list().begin(), b.list().end());
        return Value(std::move(l));
      }
    }
    if (op == "*") {
      if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) {
        int64_t n = std::max<int64_t>(b.as_int(), 0);
        if (a.is_string()) {
          if (!a.str().empty() && n > 0) check_size(n > INT64_MAX / static_cast<int64_t>(a.str().size())
                                                      ? SIZE_MAX : static_cast<size_t>(n) * a.str().size());
          std::string s;
          s.reserve(static_cast<size_t>(n) * a.str().size());
          for (int64_t i = 0; i < n; ++i) s += a.str();
          return Value(s);
        }
        int64_t len = static_cast<int64_t>(a.list().size());
        if (len > 0 && n > 0) charge(n > limits_.max_steps / len ? limits_.max_steps + 1 : n * len);
        List l;
        for (int64_t i = 0; i < n; ++i) l.insert(l.end(), a.list().begin(), a.list().end());
        return Value(std::move(l));
      }
      if (a.is_int() && (b.is_string() || b.is_list())) return arith(op, b, a);
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

  bool contains(const Value& container, const Value& item) {
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

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List l;
        for (auto& c : e.children) l.push_back(eval(*c));
        return e.kind == Expr::Kind::kTuple ? Value::tuple(std::move(l)) : Value(std::move(l));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value k = eval(*e.children[i]);
          d.set(k.to_str(), eval(*e.children[i + 1]));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::kAttr: return get_attr(eval(*e.children[0]), e.name, *e.children[0]);
      case Expr::Kind::kIndex: return get_item(eval(*e.children[0]), eval(*e.children[1]), *e.children[0]);
      case Expr::Kind::kSlice: {
        Value obj = eval(*e.children[0]);
        Value start = e.children[1] ? eval(*e.children[1]) : Value();
        Value stop = e.children[2] ? eval(*e.children[2]) : Value();
        Value step = e.children[3] ? eval(*e.children[3]) : Value();
        if (obj.is_list()) {
          List l;
          for (int64_t i : slice_indices(static_cast<int64_t>(obj.list().size()), start, stop, step)) l.push_back(obj.list()[i]);
          return Value(std::move(l));
        }
        if (obj.is_string()) {
          auto cs = utf8_chars(obj.str());
          std::string s;
          for (int64_t i : slice_indices(static_cast<int64_t>(cs.size()), start, stop, step)) s += cs[i];
          return Value(s);
        }
        if (obj.is_undefined()) error_at(e.line, e.col, fmt::format("'{}' is undefined", describe(*e.children[0])));
        problem(fmt::format("'{}' object is not subscriptable", obj.type_name()));
      }
      case Expr::Kind::kCall: {
        Value callee = eval(*e.children[0]);
        if (!callee.is_callable()) {
          if (callee.is_undefined()) problem(fmt::format("'{}' is undefined", describe(*e.children[0])));
          problem(fmt::format("'{}' object is not callable", callee.type_name()));
        }
        Args a = eval_args(e, 1);
        return callee.fn()(a);
      }
      case Expr::Kind::kFilter: return apply_filter(e, eval(*e.children[0]));
      case Expr::Kind::kTest: {
        Value v = eval(*e.children[0]);
        Args a = eval_args(e, 1);
        bool r = apply_test(e.name, v, a);
        return Value(e.negate ? !r : r);
      }
      case Expr::Kind::kUnary: {
        if (e.name == "not") return Value(!eval(*e.children[0]).truthy());
        Value v = eval(*e.children[0]);
        if (!v.is_number()) problem(fmt::format("bad operand type for unary {}: '{}'", e.name, v.type_name()));
        if (e.name == "-" && !v.is_float() && v.as_int() == INT64_MIN) problem("integer overflow in unary -");
        if (e.name == "-") return v.is_float() ? Value(-v.as_float()) : Value(-v.as_int());
        return v.is_float() ? Value(v.as_float()) : Value(v.as_int());
      }
      case Expr::Kind::kBinary: {
        const std::string& op = e.name;
        if (op == "and") {
          Value a = eval(*e.children[0]);
          return a.truthy() ? eval(*e.children[1]) : a;
        }
        if (op == "or") {
          Value a = eval(*e.children[0]);
          return a.truthy() ? a : eval(*e.children[1]);
        }
        Value a = eval(*e.children[0]);
        Value b = eval(*e.children[1]);
        if (op == "~") {
          std::string sa = a.to_str(), sb = b.to_str();
          check_size(sa.size() + sb.size());
          return Value(sa + sb);
        }
        if (op == "==") return Value(a == b);
        if (op == "!=") return Value(!(a == b));
        if (op == "<") return Value(compare_values(a, b) < 0);
        if (op == ">") return Value(compare_values(a, b) > 0);
        if (op == "<=") return Value(compare_values(a, b) <= 0);
        if (op == ">=") return Value(compare_values(a, b) >= 0);
        if (op == "in") return Value(contains(b, a));
        if (op == "not in") return Value(!contains(b, a));
        return arith(op, a, b);
      }
      case Expr::Kind::kCond: {
        if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
        return e.children[2] ? eval(*e.children[2]) : Value();
      }
    }
    return Value();
  }

  bool apply_test(const std::string& name, const Value& v, Args& a) {
    const Value* arg = a.positional.empty() ? nullptr : &a.positional[0];
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_int() || v.is_float();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "mapping") return v.is_dict();
    if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
    if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
    if (name == "callable") return v.is_callable();
    if (name == "even" || name == "odd") {
      if (!v.is_number()) problem("even/odd test needs a number");
      int64_t r = v.as_int() % 2;
      return name == "even" ? r == 0 : r != 0;
    }
    if (name == "divisibleby") return arg && arg->as_int() != 0 && v.as_int() % arg->as_int() == 0;
    if (!arg && (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "lt" || name == "gt" ||
                 name == "le" || name == "ge" || name == "in" || name == "sameas"))
      problem(fmt::format("test '{}' needs an argument", name));
    if (name == "eq" || name == "equalto" || name == "==") return v == *arg;
    if (name == "ne" || name == "!=") return !(v == *arg);
    if (name == "lt" || name == "lessthan" || name == "<") return compare_values(v, *arg) < 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return compare_values(v, *arg) > 0;
    if (name == "le" || name == "<=") return compare_values(v, *arg) <= 0;
    if (name == "ge" || name == ">=") return compare_values(v, *arg) >= 0;
    if (name == "in") return contains(*arg, v);
    if (name == "sameas") return v == *arg && v.kind() == arg->kind();
    if (name == "lower") return v.is_string() && ascii_lower(v.str()) == v.str();
    if (name == "upper") return v.is_string() && ascii_upper(v.str()) == v.str();
    problem(fmt::format("no test named '{}'", name));
  }

  // Filters usable by name from select/map: `name` with the value and extra args.
  Value call_filter(const std::string& name, const Value& v, Args& a) {
    auto arg = [&](size_t i, const std::string& n) { return a.get(i, n); };
    if (name == "tojson") {
      const Value* indent = arg(0, "indent");
      int ind = indent && !indent->is_none() ? static_cast<int>(indent->as_int()) : -1;
      std::string item_sep = ind >= 0 ? "," : ", ", key_sep = ": ";
      if (const Value* seps = arg(1, "separators"); seps && seps->is_list() && seps->list().size() == 2) {
        item_sep = seps->list()[0].to_str();
        key_sep = seps->list()[1].to_str();
      }
      const Value* sk = arg(2, "sort_keys");
      return Value(python_json_dumps(v, ind, item_sep, key_sep, sk && sk->truthy()));
    }
    if (name == "length" || name == "count") return Value(length_of(v));
    if (name == "trim") {
      if (!v.is_string()) return Value(py_strip(v.to_str(), arg(0, "chars"), true, true));
      return Value(py_strip(v.str(), arg(0, "chars"), true, true));
    }
    if (name == "string") return Value(v.to_str());
    if (name == "upper") return Value(ascii_upper(v.to_str()));
    if (name == "lower") return Value(ascii_lower(v.to_str()));
    if (name == "capitalize") return Value(unicode_capitalize(v.to_str()));
    if (name == "title") {
      std::string s = v.to_str(), r;
      bool start = true;
      for (char c : s) {
        r.push_back(start ? static_cast<char>(toupper(static_cast<unsigned char>(c))) : static_cast<char>(tolower(static_cast<unsigned char>(c))));
        start = c == ' ' || c == '-' || c == '\t' || c == '\n' || c == '(' || c == '{' || c == '[' || c == '<';
      }
      return Value(r);
    }
    if (name == "replace") {
      const Value* f = arg(0, "old");
      const Value* t = arg(1, "new");
      if (!f || !t) problem("replace filter needs two arguments");
      return Value(py_replace(v.to_str(), f->to_str(), t->to_str(), int_arg(a, 2, "count", -1)));
    }
    if (name == "default" || name == "d") {
      const Value* def = arg(0, "default_value");
      const Value* boolean = arg(1, "boolean");
      bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
      return use_default ? (def ? *def : Value(std::string())) : v;
    }
    if (name == "list") return Value(iterate(v));
    if (name == "first") {
      List l = iterate(v);
      return l.empty() ? Value() : l.front();
    }
    if (name == "last") {
      List l = iterate(v);
      return l.empty() ? Value() : l.back();
    }
    if (name == "reverse") {
      if (v.is_string()) {
        auto cs = utf8_chars(v.str());
        std::string r;
        for (auto it = cs.rbegin(); it != cs.rend(); ++it) r += *it;
        return Value(r);
      }
      List l = iterate(v);
      std::reverse(l.begin(), l.end());
      return Value(std::move(l));
    }
    if (name == "join") {
      const Value* sep = arg(0, "d");
      const Value* attribute = arg(1, "attribute");
      std::string s = sep ? sep->to_str() : "", out;
      bool first = true;
      for (auto& e : iterate(v)) {
        Value x = attribute ? attribute_of(e, attribute->to_str()) : e;
        out += (first ? "" : s) + x.to_str();
        first = false;
      }
      return Value(out);
    }
    if (name == "items") {
      if (v.is_undefined()) return Value(List{});
      if (!v.is_dict()) problem("items filter needs a mapping");
      List l;
      for (auto& [k, x] : v.dict().items) l.push_back(Value::tuple(List{Value(k), x}));
      return Value(std::move(l));
    }
    if (name == "dictsort") {
      if (!v.is_dict()) problem("dictsort filter needs a mapping");
      const Value* cs = arg(0, "case_sensitive");
      const Value* by = arg(1, "by");
      const Value* rev = arg(2, "reverse");
      bool by_value = by && by->to_str() == "value";
      bool sensitive = cs && cs->truthy();
      List l;
      for (auto& [k, x] : v.dict().items) l.push_back(Value::tuple(List{Value(k), x}));
      std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) {
        Value x = p.list()[by_value ? 1 : 0], y = q.list()[by_value ? 1 : 0];
        if (!sensitive && x.is_string() && y.is_string()) {
          x = Value(ascii_lower(x.str()));
          y = Value(ascii_lower(y.str()));
        }
        return compare_values(x, y) < 0;
      });
      if (rev && rev->truthy()) std::reverse(l.begin(), l.end());
      return Value(std::move(l));
    }
    if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
      bool attr_mode = name == "selectattr" || name == "rejectattr";
      bool want = name == "selectattr" || name == "select";
      size_t k = 0;
      std::string attribute;
      if (attr_mode) {
        if (a.positional.empty()) problem(name + " needs an attribute name");
        attribute = a.positional[k++].to_str();
      }
      std::string test = k < a.positional.size() ? a.positional[k++].to_str() : "";
      Args rest;
      rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(std::min(k, a.positional.size())),
                             a.positional.end());
      List out;
      for (auto& e : iterate(v)) {
        Value x = attr_mode ? attribute_of(e, attribute) : e;
        bool ok = test.empty() ? x.truthy() : apply_test(test, x, rest);
        if (ok == want) out.push_back(e);
      }
      return Value(std::move(out));
    }
    if (name == "map") {
      List out;
      if (const Value* attribute = a.kw("attribute")) {
        const Value* def = a.kw("default");
        for (auto& e : iterate(v)) {
          Value x = attribute_of(e, attribute->to_str());
          out.push_back(x.is_undefined() && def ? *def : x);
        }
        return Value(std::move(out));
      }
      if (a.positional.empty()) problem("map filter needs a filter name or attribute=");
      std::string f = a.positional[0].to_str();
      Args rest;
      rest.positional.assign(a.positional.begin() + 1, a.positional.end());
      rest.keyword = a.keyword;
      for (auto& e : iterate(v)) out.push_back(call_filter(f, e, rest));
      return Value(std::move(out));
    }
    if (name == "attr") return attribute_of(v, arg(0, "name") ? arg(0, "name")->to_str() : "");
    if (name == "unique") {
      List out;
      for (auto& e : iterate(v))
        if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
      return Value(std::move(out));
    }
    if (name == "sort") {
      const Value* rev = arg(0, "reverse");
      const Value* attribute = arg(2, "attribute");
      List l = iterate(v);
      std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) {
        Value x = attribute ? attribute_of(p, attribute->to_str()) : p;
        Value y = attribute ? attribute_of(q, attribute->to_str()) : q;
        return compare_values(x, y) < 0;
      });
      if (rev && rev->truthy()) std::reverse(l.begin(), l.end());
      return Value(std::move(l));
    }
    if (name == "int") {
      if (v.is_number()) return Value(v.as_int());
      try {
        return Value(static_cast<int64_t>(std::stoll(v.to_str())));
      } catch (...) {
        const Value* def = arg(0, "default");
        return def ? *def : Value(static_cast<int64_t>(0));
      }
    }
    if (name == "float") {
      if (v.is_number()) return Value(v.as_float());
      try {
        return Value(std::stod(v.to_str()));
      } catch (...) {
        return Value(0.0);
      }
    }
    if (name == "abs" && v.is_int() && v.as_int() == INT64_MIN) problem("integer overflow in abs");
    if (name == "abs") return v.is_float() ? Value(std::fabs(v.as_float())) : Value(static_cast<int64_t>(std::llabs(v.as_int())));
    if (name == "round") {
      int64_t prec = int_arg(a, 0, "precision", 0);
      double m = std::pow(10.0, static_cast<double>(prec));
      return Value(std::round(v.as_float() * m) / m);
    }
    if (name == "sum") {
      Value total = arg(1, "start") ? *arg(1, "start") : Value(static_cast<int64_t>(0));
      const Value* attribute = arg(0, "attribute");
      for (auto& e : iterate(v)) total = arith("+", total, attribute ? attribute_of(e, attribute->to_str()) : e);
      return total;
    }
    if (name == "min" || name == "max") {
      List l = iterate(v);
      if (l.empty()) return Value();
      Value best = l[0];
      for (auto& e : l)
        if ((compare_values(e, best) < 0) == (name == "min") && !(e == best)) best = e;
      return best;
    }
    if (name == "safe") return v;
    if (name == "escape" || name == "e") {
      std::string s = v.to_str(), out;
      for (char c : s) {
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out.push_back(c);
        }
      }
      return Value(out);
    }
    if (name == "indent") {
      int64_t width = int_arg(a, 0, "width", 4);
      const Value* first = arg(1, "first");
      const Value* blank = arg(2, "blank");
      std::string pad(static_cast<size_t>(width), ' ');
      std::string s = v.to_str(), out;
      size_t pos = 0;
      bool first_line = true;
      while (true) {
        size_t nl = s.find('\n', pos);
        std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        bool indent_it = first_line ? (first && first->truthy()) : (!line.empty() || (blank && blank->truthy()));
        out += (indent_it ? pad : "") + line;
        if (nl == std::string::npos) break;
        out += "\n";
        pos = nl + 1;
        first_line = false;
      }
      return Value(out);
    }
    if (name == "wordcount") {  // len(re.findall(r"\w+", s))
      int64_t n = 0;
      bool in_word = false;
      for (const std::string& ch : utf8_chars(v.to_str())) {
        UChar32 c = static_cast<UChar32>(decode_cp(ch));
        int8_t t = u_charType(c);
        bool w = c == '_' || u_isalpha(c) || t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
        if (w && !in_word) ++n;
        in_word = w;
      }
      return Value(n);
    }
    if (name == "pprint") return Value(v.repr());
    problem(fmt::format("no filter named '{}'", name));
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
        size_t i = SIZE_MAX;
        std::from_chars(part.data(), part.data() + part.size(), i);
        cur = i < cur.list().size() ? cur.list()[i] : Value();
      } else {
        cur = Value();
      }
      if (dot == std::string::npos) return cur;
      pos = dot + 1;
    }
  }

  Value apply_filter(const Expr& f, const Value& v) {
    Args a = eval_args(f, 1);
    try {
      return call_filter(f.name, v, a);
    } catch (const RuntimeProblem& p) {
      error_at(f.line, f.col, p.message);
    }
  }
};

}  // namespace

Template::Template(const std::string& source) : body_(parse_template(source)) {}

std::string Template::render(const std::map<std::string, Value>& variables, const RenderLimits& limits) const {
  Renderer r(variables, limits);
  std::string out;
  try {
    r.exec(body_, out);
  } catch (const RuntimeProblem& p) {  // a limit reached outside any expression
    fail(ErrorKind::kBadInput, "chat template: {}", p.message);
  }
  return out;
}

}  // namespace nextn::jinja
