// chat/jinja_value.cc — Python semantics of values: truthiness, str/repr, equality, JSON.
#include "chat/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <unicode/uchar.h>

namespace nextn::jinja {

const Value* Dict::find(const std::string& key) const {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

Value* Dict::find(const std::string& key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  if (Value* slot = find(key)) *slot = std::move(v);
  else items.emplace_back(key, std::move(v));
}

const Value* Args::kw(const std::string& name) const {
  for (auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

const Value* Args::get(size_t i, const std::string& name) const {
  if (i < positional.size()) return &positional[i];
  return kw(name);
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (auto& e : j) l.push_back(from_json(e));
      return Value(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto& [k, v] : j.items()) d.items.emplace_back(k, from_json(v));
      return Value(std::move(d));
    }
    default: return Value();
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return int_ != 0;
    case Kind::kFloat: return float_ != 0;
    case Kind::kString: return !str_->empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->items.empty();
    case Kind::kCallable: return true;
  }
  return false;
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's formatting rules (repr uses scientific
  // notation when the exponent is < -4 or >= 16).
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;  // d.ddde[+-]XX
  size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  int exp = std::atoi(s.c_str() + e + 1);
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    if (digits.size() <= static_cast<size_t>(exp + 1)) {
      out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
  }
  return neg ? "-" + out : out;
}

namespace {

// Python str.isprintable() for one code point.
bool py_isprintable(char32_t c) {
  if (c == ' ') return true;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR: case U_FORMAT_CHAR: case U_SURROGATE: case U_PRIVATE_USE_CHAR: case U_UNASSIGNED:
    case U_LINE_SEPARATOR: case U_PARAGRAPH_SEPARATOR: case U_SPACE_SEPARATOR: return false;
    default: return true;
  }
}

std::string py_str_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (const std::string& ch : utf8_chars(s)) {
    unsigned char c = ch[0];
    char32_t cp = c;
    if (c >= 0x80) {
      int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
      cp = c & (0x3F >> n);
      for (size_t k = 1; k < ch.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(ch[k]) & 0x3F);
    }
    if (cp == '\\') out += "\\\\";
    else if (cp == static_cast<unsigned char>(q)) out += std::string("\\") + q;
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (py_isprintable(cp)) out += ch;
    else if (cp < 0x100) out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    else if (cp < 0x10000) out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    else out += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
  }
  out.push_back(q);
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

void dumps(std::string& out, const Value& v, int indent, int depth, const std::string& item_sep,
           const std::string& key_sep, bool sort_keys) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      double f = v.as_float();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : python_float_repr(f);
      return;
    }
    case Value::Kind::kString: json_string(out, v.str()); return;
    case Value::Kind::kCallable: json_string(out, v.fn_name()); return;
    case Value::Kind::kList: {
      if (v.list().empty()) { out += "[]"; return; }
      out.push_back('[');
      bool first = true;
      for (auto& e : v.list()) {
        if (!first) out += item_sep;
        first = false;
        newline(depth + 1);
        dumps(out, e, indent, depth + 1, item_sep, key_sep, sort_keys);
      }
      newline(depth);
      out.push_back(']');
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict().items.empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, Value>*> items;
      for (auto& kv : v.dict().items) items.push_back(&kv);
      if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out.push_back('{');
      bool first = true;
      for (auto* kv : items) {
        if (!first) out += item_sep;
        first = false;
        newline(depth + 1);
        json_string(out, kv->first);
        out += key_sep;
        dumps(out, kv->second, indent, depth + 1, item_sep, key_sep, sort_keys);
      }
      newline(depth);
      out.push_back('}');
      return;
    }
  }
}

}  // namespace

std::string python_json_dumps(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                              bool sort_keys) {
  std::string out;
  dumps(out, v, indent, 0, item_sep, key_sep, sort_keys);
  return out;
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return *str_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return int_ ? "True" : "False";
    case Kind::kInt: return std::to_string(int_);
    case Kind::kFloat: return python_float_repr(float_);
    case Kind::kString: return py_str_repr(*str_);
    case Kind::kCallable: return "<function " + *str_ + ">";
    case Kind::kList: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (auto& [k, v] : dict_->items) {
        out += (first ? "" : ", ") + py_str_repr(k) + ": " + v.repr();
        first = false;
      }
      return out + "}";
    }
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kDict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "?";
}

bool Value::operator==(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return as_float() == o.as_float();
    return int_ == o.int_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return *str_ == *o.str_;
    case Kind::kList: {
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i)
        if (!((*list_)[i] == (*o.list_)[i])) return false;
      return true;
    }
    case Kind::kDict: {
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (auto& [k, v] : dict_->items) {
        const Value* w = o.dict_->find(k);
        if (!w || !(v == *w)) return false;
      }
      return true;
    }
    case Kind::kCallable: return fn_ == o.fn_;
    default: return false;
  }
}

nlohmann::ordered_json Value::to_json() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return nullptr;
    case Kind::kBool: return as_bool();
    case Kind::kInt: return int_;
    case Kind::kFloat: return float_;
    case Kind::kString: return *str_;
    case Kind::kCallable: return *str_;
    case Kind::kList: {
      auto a = nlohmann::ordered_json::array();
      for (auto& e : *list_) a.push_back(e.to_json());
      return a;
    }
    case Kind::kDict: {
      auto o = nlohmann::ordered_json::object();
      for (auto& [k, v] : dict_->items) o[k] = v.to_json();
      return o;
    }
  }
  return nullptr;
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace nextn::jinja
