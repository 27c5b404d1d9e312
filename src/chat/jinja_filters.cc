// chat/jinja_filters.cc — Jinja filters ({{ x | tojson }}) and tests ({% if x is
// defined %}) as name → function tables, with the arguments and quirks of Jinja2 as
// transformers configures it (tojson without HTML escaping, dictsort, selectattr, map,
// ...). select/reject use the test table; map calls back into the filter table.
#include <charconv>
#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>

#include <fmt/format.h>
#include <unicode/uchar.h>

#include "chat/jinja_builtins.h"
#include "chat/jinja_python.h"
#include "tokenizer/normalizer.h"

namespace nextn::jinja {

namespace {

using Filter = std::function<Value(const Value& v, Args& a)>;
using Test = std::function<bool(const Value& v, const Value* arg)>;

// ---- tests ----

const Value& needs_arg(const std::string& name, const Value* arg) {
  if (!arg) problem(fmt::format("test '{}' needs an argument", name));
  return *arg;
}

const std::unordered_map<std::string, Test>& tests() {
  static const std::unordered_map<std::string, Test> table = [] {
    std::unordered_map<std::string, Test> t;
    t["defined"] = [](const Value& v, const Value*) { return !v.is_undefined(); };
    t["undefined"] = [](const Value& v, const Value*) { return v.is_undefined(); };
    t["none"] = [](const Value& v, const Value*) { return v.is_none(); };
    t["string"] = [](const Value& v, const Value*) { return v.is_string(); };
    t["number"] = [](const Value& v, const Value*) { return v.is_int() || v.is_float(); };
    t["integer"] = [](const Value& v, const Value*) { return v.is_int(); };
    t["float"] = [](const Value& v, const Value*) { return v.is_float(); };
    t["boolean"] = [](const Value& v, const Value*) { return v.is_bool(); };
    t["true"] = [](const Value& v, const Value*) { return v.is_bool() && v.as_bool(); };
    t["false"] = [](const Value& v, const Value*) { return v.is_bool() && !v.as_bool(); };
    t["mapping"] = [](const Value& v, const Value*) { return v.is_dict(); };
    t["iterable"] = [](const Value& v, const Value*) { return v.is_list() || v.is_dict() || v.is_string(); };
    t["sequence"] = t["iterable"];
    t["callable"] = [](const Value& v, const Value*) { return v.is_callable(); };
    for (bool even : {true, false})
      t[even ? "even" : "odd"] = [even](const Value& v, const Value*) {
        if (!v.is_number()) problem("even/odd test needs a number");
        int64_t r = v.as_int() % 2;
        return even ? r == 0 : r != 0;
      };
    t["divisibleby"] = [](const Value& v, const Value* arg) {
      return arg && arg->as_int() != 0 && v.as_int() % arg->as_int() == 0;
    };
    // Comparisons, under every name Jinja2 gives them.
    auto compare = [&t](std::initializer_list<const char*> names, std::function<bool(int)> holds) {
      for (const char* name : names)
        t[name] = [name = std::string(name), holds](const Value& v, const Value* arg) {
          return holds(compare_values(v, needs_arg(name, arg)));
        };
    };
    compare({"lt", "lessthan", "<"}, [](int c) { return c < 0; });
    compare({"gt", "greaterthan", ">"}, [](int c) { return c > 0; });
    compare({"le", "<="}, [](int c) { return c <= 0; });
    compare({"ge", ">="}, [](int c) { return c >= 0; });
    for (const char* name : {"eq", "equalto", "=="})
      t[name] = [name = std::string(name)](const Value& v, const Value* arg) { return v == needs_arg(name, arg); };
    for (const char* name : {"ne", "!="})
      t[name] = [name = std::string(name)](const Value& v, const Value* arg) { return !(v == needs_arg(name, arg)); };
    t["in"] = [](const Value& v, const Value* arg) { return python_contains(needs_arg("in", arg), v); };
    t["sameas"] = [](const Value& v, const Value* arg) {
      const Value& other = needs_arg("sameas", arg);
      return v == other && v.kind() == other.kind();
    };
    t["lower"] = [](const Value& v, const Value*) { return v.is_string() && py_lower(v.str()) == v.str(); };
    t["upper"] = [](const Value& v, const Value*) { return v.is_string() && py_upper(v.str()) == v.str(); };
    return t;
  }();
  return table;
}

// ---- filters ----

Value tojson(const Value& v, Args& a) {
  const Value* indent = a.get(0, "indent");
  int ind = indent && !indent->is_none() ? static_cast<int>(indent->as_int()) : -1;
  std::string item_sep = ind >= 0 ? "," : ", ", key_sep = ": ";
  if (const Value* seps = a.get(1, "separators"); seps && seps->is_list() && seps->list().size() == 2) {
    item_sep = seps->list()[0].to_str();
    key_sep = seps->list()[1].to_str();
  }
  const Value* sk = a.get(2, "sort_keys");
  return Value(python_json_dumps(v, ind, item_sep, key_sep, sk && sk->truthy()));
}

// Jinja2's title filter: upper-case after a space, dash or opening bracket (ASCII only).
Value title(const Value& v, Args&) {
  std::string s = v.to_str(), r;
  bool start = true;
  for (char c : s) {
    r.push_back(start ? static_cast<char>(toupper(static_cast<unsigned char>(c))) : static_cast<char>(tolower(static_cast<unsigned char>(c))));
    start = c == ' ' || c == '-' || c == '\t' || c == '\n' || c == '(' || c == '{' || c == '[' || c == '<';
  }
  return Value(r);
}

Value default_value(const Value& v, Args& a) {
  const Value* def = a.get(0, "default_value");
  const Value* boolean = a.get(1, "boolean");
  bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
  return use_default ? (def ? *def : Value(std::string())) : v;
}

Value reverse(const Value& v, Args&) {
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

Value join(const Value& v, Args& a) {
  const Value* sep = a.get(0, "d");
  const Value* attribute = a.get(1, "attribute");
  std::string s = sep ? sep->to_str() : "", out;
  bool first = true;
  for (auto& e : iterate(v)) {
    Value x = attribute ? attribute_of(e, attribute->to_str()) : e;
    out += (first ? "" : s) + x.to_str();
    first = false;
  }
  return Value(out);
}

Value items(const Value& v, Args&) {
  if (v.is_undefined()) return Value(List{});
  if (!v.is_dict()) problem("items filter needs a mapping");
  List l;
  for (auto& [k, x] : v.dict().items) l.push_back(Value::tuple(List{Value(k), x}));
  return Value(std::move(l));
}

Value dictsort(const Value& v, Args& a) {
  if (!v.is_dict()) problem("dictsort filter needs a mapping");
  const Value* cs = a.get(0, "case_sensitive");
  const Value* by = a.get(1, "by");
  const Value* rev = a.get(2, "reverse");
  bool by_value = by && by->to_str() == "value";
  bool sensitive = cs && cs->truthy();
  List l;
  for (auto& [k, x] : v.dict().items) l.push_back(Value::tuple(List{Value(k), x}));
  std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) {
    Value x = p.list()[by_value ? 1 : 0], y = q.list()[by_value ? 1 : 0];
    if (!sensitive && x.is_string() && y.is_string()) {
      x = Value(py_lower(x.str()));
      y = Value(py_lower(y.str()));
    }
    return compare_values(x, y) < 0;
  });
  if (rev && rev->truthy()) std::reverse(l.begin(), l.end());
  return Value(std::move(l));
}

// select / reject (by the item) and selectattr / rejectattr (by one of its attributes):
// keep the items for which the named test (or plain truth) equals `want`.
Filter select_filter(const std::string& name, bool attr_mode, bool want) {
  return [name, attr_mode, want](const Value& v, Args& a) {
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
  };
}

Value map(const Value& v, Args& a) {
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

Value unique(const Value& v, Args&) {
  List out;
  for (auto& e : iterate(v))
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  return Value(std::move(out));
}

Value sort(const Value& v, Args& a) {
  const Value* rev = a.get(0, "reverse");
  const Value* attribute = a.get(2, "attribute");
  List l = iterate(v);
  std::stable_sort(l.begin(), l.end(), [&](const Value& p, const Value& q) {
    Value x = attribute ? attribute_of(p, attribute->to_str()) : p;
    Value y = attribute ? attribute_of(q, attribute->to_str()) : q;
    return compare_values(x, y) < 0;
  });
  if (rev && rev->truthy()) std::reverse(l.begin(), l.end());
  return Value(std::move(l));
}

Value to_int(const Value& v, Args& a) {
  if (v.is_number()) return Value(v.as_int());
  try {
    return Value(static_cast<int64_t>(std::stoll(v.to_str())));
  } catch (...) {
    const Value* def = a.get(0, "default");
    return def ? *def : Value(static_cast<int64_t>(0));
  }
}

Value to_float(const Value& v, Args&) {
  if (v.is_number()) return Value(v.as_float());
  try {
    return Value(std::stod(v.to_str()));
  } catch (...) {
    return Value(0.0);
  }
}

Value sum(const Value& v, Args& a) {
  Value total = a.get(1, "start") ? *a.get(1, "start") : Value(static_cast<int64_t>(0));
  const Value* attribute = a.get(0, "attribute");
  for (auto& e : iterate(v)) total = binary_arith("+", total, attribute ? attribute_of(e, attribute->to_str()) : e);
  return total;
}

Filter extreme(bool min) {
  return [min](const Value& v, Args&) {
    List l = iterate(v);
    if (l.empty()) return Value();
    Value best = l[0];
    for (auto& e : l)
      if ((compare_values(e, best) < 0) == min && !(e == best)) best = e;
    return best;
  };
}

Value escape(const Value& v, Args&) {
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

Value indent(const Value& v, Args& a) {
  int64_t width = int_arg(a, 0, "width", 4);
  const Value* first = a.get(1, "first");
  const Value* blank = a.get(2, "blank");
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

// len(re.findall(r"\w+", s)): runs of letters, digits and underscores.
Value wordcount(const Value& v, Args&) {
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

const std::unordered_map<std::string, Filter>& filters() {
  static const std::unordered_map<std::string, Filter> table = [] {
    std::unordered_map<std::string, Filter> t;
    t["tojson"] = tojson;
    t["length"] = t["count"] = [](const Value& v, Args&) { return Value(length_of(v)); };
    t["trim"] = [](const Value& v, Args& a) {
      return Value(py_strip(v.is_string() ? v.str() : v.to_str(), a.get(0, "chars"), true, true));
    };
    t["string"] = [](const Value& v, Args&) { return Value(v.to_str()); };
    t["upper"] = [](const Value& v, Args&) { return Value(py_upper(v.to_str())); };
    t["lower"] = [](const Value& v, Args&) { return Value(py_lower(v.to_str())); };
    t["capitalize"] = [](const Value& v, Args&) { return Value(unicode_capitalize(v.to_str())); };
    t["title"] = title;
    t["replace"] = [](const Value& v, Args& a) {
      const Value* f = a.get(0, "old");
      const Value* to = a.get(1, "new");
      if (!f || !to) problem("replace filter needs two arguments");
      return Value(py_replace(v.to_str(), f->to_str(), to->to_str(), int_arg(a, 2, "count", -1)));
    };
    t["default"] = t["d"] = default_value;
    t["list"] = [](const Value& v, Args&) { return Value(iterate(v)); };
    t["first"] = [](const Value& v, Args&) {
      List l = iterate(v);
      return l.empty() ? Value() : l.front();
    };
    t["last"] = [](const Value& v, Args&) {
      List l = iterate(v);
      return l.empty() ? Value() : l.back();
    };
    t["reverse"] = reverse;
    t["join"] = join;
    t["items"] = items;
    t["dictsort"] = dictsort;
    t["select"] = select_filter("select", false, true);
    t["reject"] = select_filter("reject", false, false);
    t["selectattr"] = select_filter("selectattr", true, true);
    t["rejectattr"] = select_filter("rejectattr", true, false);
    t["map"] = map;
    t["attr"] = [](const Value& v, Args& a) {
      return attribute_of(v, a.get(0, "name") ? a.get(0, "name")->to_str() : "");
    };
    t["unique"] = unique;
    t["sort"] = sort;
    t["int"] = to_int;
    t["float"] = to_float;
    t["abs"] = [](const Value& v, Args&) {
      if (!v.is_float() && v.as_int() == INT64_MIN) problem("integer overflow in abs");
      return v.is_float() ? Value(std::fabs(v.as_float())) : Value(static_cast<int64_t>(std::llabs(v.as_int())));
    };
    t["round"] = [](const Value& v, Args& a) {
      int64_t prec = int_arg(a, 0, "precision", 0);
      double m = std::pow(10.0, static_cast<double>(prec));
      return Value(std::round(v.as_float() * m) / m);
    };
    t["sum"] = sum;
    t["min"] = extreme(true);
    t["max"] = extreme(false);
    t["safe"] = [](const Value& v, Args&) { return v; };
    t["escape"] = t["e"] = escape;
    t["indent"] = indent;
    t["wordcount"] = wordcount;
    t["pprint"] = [](const Value& v, Args&) { return Value(v.repr()); };
    return t;
  }();
  return table;
}

}  // namespace

Value call_filter(const std::string& name, const Value& v, Args& a) {
  auto it = filters().find(name);
  if (it == filters().end()) problem(fmt::format("no filter named '{}'", name));
  return it->second(v, a);
}

bool apply_test(const std::string& name, const Value& v, Args& a) {
  auto it = tests().find(name);
  if (it == tests().end()) problem(fmt::format("no test named '{}'", name));
  return it->second(v, a.positional.empty() ? nullptr : &a.positional[0]);
}

}  // namespace nextn::jinja
