// chat/jinja_value.h — the value model of the Jinja interpreter, with Python semantics:
// undefined, none, bool, int, float, str, list, dict (insertion-ordered, string keys),
// callables (macros, builtins, methods). Lists and dicts are shared (reference semantics,
// as in Python), which is what namespace() attribute assignment relies on.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace nextn::jinja {

class Value;
using List = std::vector<Value>;

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // attributes may be assigned with {% set ns.x = ... %}
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  void set(const std::string& key, Value v);
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* kw(const std::string& name) const;
  // Positional i or keyword `name`, or nullptr.
  const Value* get(size_t i, const std::string& name) const;
};

using Function = std::function<Value(Args&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // undefined
  static Value none() { Value v; v.kind_ = Kind::kNone; return v; }
  Value(bool b) : kind_(Kind::kBool), int_(b) {}
  Value(int v) : kind_(Kind::kInt), int_(v) {}
  Value(int64_t v) : kind_(Kind::kInt), int_(v) {}
  Value(double v) : kind_(Kind::kFloat), float_(v) {}
  Value(std::string s) : kind_(Kind::kString), str_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(List l) : kind_(Kind::kList), list_(std::make_shared<List>(std::move(l))) {}
  Value(Dict d) : kind_(Kind::kDict), dict_(std::make_shared<Dict>(std::move(d))) {}
  static Value function(Function f, std::string name) {
    Value v;
    v.kind_ = Kind::kCallable;
    v.fn_ = std::make_shared<Function>(std::move(f));
    v.str_ = std::make_shared<std::string>(std::move(name));
    return v;
  }
  static Value from_json(const nlohmann::ordered_json& j);
  static Value tuple(List l) {
    Value v(std::move(l));
    v.tuple_ = true;
    return v;
  }
  bool is_tuple() const { return tuple_; }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return kind_ == Kind::kFloat ? static_cast<int64_t>(float_) : int_; }
  double as_float() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return *str_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Function& fn() const { return *fn_; }
  const std::string& fn_name() const { return *str_; }

  bool truthy() const;
  std::string to_str() const;   // Python str()
  std::string repr() const;     // Python repr()
  std::string type_name() const;
  bool operator==(const Value& o) const;
  nlohmann::ordered_json to_json() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;  // a list written as a tuple: repr() uses parentheses
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<std::string> str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// Python's float repr (shortest round-trip, "1.0", "1e-05", "inf", "nan").
std::string python_float_repr(double v);
// Python json.dumps(v, ensure_ascii=False, indent, separators, sort_keys).
std::string python_json_dumps(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                              bool sort_keys);
// Code points of a UTF-8 string (Python indexing/len are by code point).
std::vector<std::string> utf8_chars(const std::string& s);

}  // namespace nextn::jinja
