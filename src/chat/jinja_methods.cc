// chat/jinja_methods.cc — the Python methods templates call on values: str (strip,
// split, startswith, format, ...), dict (items, keys, values, get) and list (index,
// count; the mutating ones are refused, as transformers' immutable sandbox does). Each
// type has a name → function table; a lookup binds the receiver into a callable value.
#include <charconv>
#include <algorithm>
#include <functional>
#include <unordered_map>

#include <fmt/format.h>

#include "chat/jinja_builtins.h"
#include "chat/jinja_python.h"
#include "tokenizer/normalizer.h"

namespace nextn::jinja {

namespace {

using StringMethod = std::function<Value(const std::string& s, Args& a)>;
using ObjectMethod = std::function<Value(const Value& self, Args& a)>;

Value split_result(const std::vector<std::string>& parts) {
  List l;
  for (auto& p : parts) l.push_back(Value(p));
  return Value(std::move(l));
}

Value splitlines(const std::string& s, Args&) {
  List l;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t f = s.find_first_of("\r\n", pos);
    if (f == std::string::npos) { l.push_back(Value(s.substr(pos))); break; }
    l.push_back(Value(s.substr(pos, f - pos)));
    pos = f + ((s[f] == '\r' && f + 1 < s.size() && s[f + 1] == '\n') ? 2 : 1);
  }
  return Value(std::move(l));
}

// startswith / endswith: the argument is a str or a tuple of str.
StringMethod affix_test(const std::string& name, bool prefix) {
  return [name, prefix](const std::string& s, Args& a) {
    const Value* p = a.get(0, "prefix");
    if (!p) problem(name + "() takes at least 1 argument");
    List cands = p->is_list() ? p->list() : List{*p};
    for (auto& c : cands) {
      if (!c.is_string()) problem(name + " first arg must be str or a tuple of str");
      const std::string& x = c.str();
      bool ok = prefix ? s.compare(0, x.size(), x) == 0
                       : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
      if (ok) return Value(true);
    }
    return Value(false);
  };
}

// find / rfind / index / count of a substring; positions are in code points.
StringMethod substring_search(const std::string& name) {
  return [name](const std::string& s, Args& a) {
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
  };
}

// isdigit / isalpha / isalnum / isspace / islower / isupper, byte by byte (ASCII classes).
StringMethod char_class(const std::string& name) {
  return [name](const std::string& s, Args&) {
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
  };
}

Value join(const std::string& s, Args& a) {
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
}

// str.format with {} / {0} / {name} fields and {{ }} escapes (no format specs).
Value format(const std::string& s, Args& a) {
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
      size_t k = SIZE_MAX;  // an index too large for size_t is simply missing
      std::from_chars(field.data(), field.data() + field.size(), k);
      v = k < a.positional.size() ? &a.positional[k] : nullptr;
    } else v = a.kw(field);
    if (!v) problem("format(): missing argument");
    out += v->to_str();
    i = close;
  }
  return Value(out);
}

const std::unordered_map<std::string, StringMethod>& string_methods() {
  static const std::unordered_map<std::string, StringMethod> table = [] {
    std::unordered_map<std::string, StringMethod> t;
    t["strip"] = [](const std::string& s, Args& a) { return Value(py_strip(s, a.get(0, "chars"), true, true)); };
    t["lstrip"] = [](const std::string& s, Args& a) { return Value(py_strip(s, a.get(0, "chars"), true, false)); };
    t["rstrip"] = [](const std::string& s, Args& a) { return Value(py_strip(s, a.get(0, "chars"), false, true)); };
    t["split"] = [](const std::string& s, Args& a) {
      return split_result(py_split(s, a.get(0, "sep"), int_arg(a, 1, "maxsplit", -1)));
    };
    t["rsplit"] = [](const std::string& s, Args& a) {
      return split_result(py_rsplit(s, a.get(0, "sep"), int_arg(a, 1, "maxsplit", -1)));
    };
    t["splitlines"] = splitlines;
    t["startswith"] = affix_test("startswith", true);
    t["endswith"] = affix_test("endswith", false);
    t["replace"] = [](const std::string& s, Args& a) {
      const Value* f = a.get(0, "old");
      const Value* to = a.get(1, "new");
      if (!f || !to || !f->is_string() || !to->is_string()) problem("replace() arguments must be str");
      return Value(py_replace(s, f->str(), to->str(), int_arg(a, 2, "count", -1)));
    };
    t["lower"] = [](const std::string& s, Args&) { return Value(py_lower(s)); };
    t["upper"] = [](const std::string& s, Args&) { return Value(py_upper(s)); };
    t["capitalize"] = [](const std::string& s, Args&) { return Value(unicode_capitalize(s)); };
    t["title"] = [](const std::string& s, Args&) { return Value(unicode_title(s)); };
    for (const char* name : {"find", "rfind", "index", "count"}) t[name] = substring_search(name);
    t["join"] = join;
    for (const char* name : {"isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"})
      t[name] = char_class(name);
    t["format"] = format;
    return t;
  }();
  return table;
}

Value list_of_items(const Value& d, Args&) {
  List l;
  for (auto& [k, v] : d.dict().items) l.push_back(Value::tuple(List{Value(k), v}));
  return Value(std::move(l));
}

const std::unordered_map<std::string, ObjectMethod>& dict_methods() {
  static const std::unordered_map<std::string, ObjectMethod> table = {
      {"items", list_of_items},
      {"keys",
       [](const Value& d, Args&) {
         List l;
         for (auto& [k, v] : d.dict().items) l.push_back(Value(k));
         return Value(std::move(l));
       }},
      {"values",
       [](const Value& d, Args&) {
         List l;
         for (auto& [k, v] : d.dict().items) l.push_back(v);
         return Value(std::move(l));
       }},
      {"get",
       [](const Value& d, Args& a) {
         const Value* k = a.get(0, "key");
         if (!k) problem("get expected at least 1 argument");
         const Value* v = k->is_string() ? d.dict().find(k->str()) : nullptr;
         if (v) return *v;
         const Value* def = a.get(1, "default");
         return def ? *def : Value::none();
       }},
  };
  return table;
}

const std::unordered_map<std::string, ObjectMethod>& list_methods() {
  static const std::unordered_map<std::string, ObjectMethod> table = [] {
    std::unordered_map<std::string, ObjectMethod> t;
    t["index"] = [](const Value& l, Args& a) {
      const Value* x = a.get(0, "value");
      for (size_t i = 0; x && i < l.list().size(); ++i)
        if (l.list()[i] == *x) return Value(static_cast<int64_t>(i));
      problem("value is not in list");
    };
    t["count"] = [](const Value& l, Args& a) {
      const Value* x = a.get(0, "value");
      int64_t n = 0;
      for (auto& e : l.list()) n += x && e == *x;
      return Value(n);
    };
    // Lists are immutable in transformers' sandbox; calling a mutator is an error.
    for (std::string name : {"append", "pop", "extend", "insert", "remove", "clear", "sort", "reverse"})
      t[name] = [name](const Value&, Args&) -> Value {
        problem(fmt::format("access to attribute '{}' of 'list' object is unsafe.", name));
      };
    return t;
  }();
  return table;
}

template <typename Table, typename Receiver>
Value bind(const Table& table, const Receiver& self, const std::string& name) {
  auto it = table.find(name);
  if (it == table.end()) return Value();
  const auto& fn = it->second;
  return Value::function([self, &fn](Args& a) { return fn(self, a); }, name);
}

}  // namespace

Value string_method(const std::string& s, const std::string& name) { return bind(string_methods(), s, name); }
Value dict_method(const Value& d, const std::string& name) { return bind(dict_methods(), d, name); }
Value list_method(const Value& l, const std::string& name) { return bind(list_methods(), l, name); }

}  // namespace nextn::jinja
