// grammar/json_schema.cc — see json_schema.h. One rule per schema node (named after its
// JSON pointer's last part), shared rules for the JSON primitives, one rule per $ref
// target (so recursive schemas are recursive rules).
#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "grammar/gbnf.h"
#include "grammar/integer_range.h"
#include "grammar/pattern.h"

namespace nextn::grammar {

namespace {

using json = nlohmann::ordered_json;

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title", "description", "$schema", "$id", "$comment", "examples", "default",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict"};
  return k;
}
const std::set<std::string>& supported() {
  static const std::set<std::string> k = {"type", "properties", "required", "additionalProperties", "items",
                                          "minItems", "maxItems", "enum", "const", "pattern", "minLength",
                                          "maxLength", "format", "minimum", "maximum", "exclusiveMinimum",
                                          "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref"};
  return k;
}

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string rule_safe(const std::string& s) {
  std::string out;
  for (char c : s)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) out += c;
    else if (!out.empty() && out.back() != '-') out += '-';
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 24) out.resize(24);
  return out.empty() ? "node" : out;
}

class Compiler {
 public:
  Compiler(const json& root, Whitespace ws, int max_depth) : root_(root), ws_(ws), max_depth_(max_depth) {}

  std::string compile() {
    std::string top = visit(root_, "");
    std::string out = "root ::= " + top + "\n";
    for (auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& pointer, const std::string& what) { throw SchemaError(pointer, what); }

  std::string add_rule(const std::string& hint, const std::string& body) {
    std::string name = rule_safe(hint) + "-" + std::to_string(++counter_);
    rules_[name] = body;
    return name;
  }
  // A shared rule, defined on first use.
  std::string shared(const std::string& name) {
    if (rules_.count(name)) return name;
    rules_[name] = "";  // reserve (recursive primitives refer to each other)
    rules_[name] = primitive(name);
    return name;
  }

  std::string primitive(const std::string& name) {
    if (name == "ws")
      return ws_ == Whitespace::kCompact ? "\"\"" : ws_ == Whitespace::kSpace ? "| \" \"" : "| \" \" | \"\\n\" [ \\t]{0,20}";
    if (name == "char")
      return "[^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] "
             "[0-7] [0-9a-fA-F]{2}))";
    if (name == "string") return "\"\\\"\" " + shared("char") + "* \"\\\"\"";
    if (name == "integer") return "\"-\"? (\"0\" | [1-9] [0-9]{0,15})";
    if (name == "number") return shared("integer") + " (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?";
    if (name == "boolean") return "\"true\" | \"false\"";
    if (name == "null") return "\"null\"";
    if (name == "value")
      return shared("object") + " | " + shared("array") + " | " + shared("string") + " | " + shared("number") + " | " +
             shared("boolean") + " | " + shared("null");
    if (name == "object") {
      std::string w = shared("ws"), s = shared("string");
      return fmt::format("\"{{\" {0} ({1} {0} \":\" {0} value ({0} \",\" {0} {1} {0} \":\" {0} value)*)? {0} \"}}\"", w, s);
    }
    if (name == "array") {
      std::string w = shared("ws");
      return fmt::format("\"[\" {0} (value ({0} \",\" {0} value)*)? {0} \"]\"", w);
    }
    throw std::logic_error("unknown primitive " + name);
  }

  const json& resolve(const std::string& ref, const std::string& where) {
    if (ref.empty() || ref[0] != '#') fail(where, "$ref '" + ref + "': only references inside this schema (#...) are supported");
    const json* node = &root_;
    std::string ptr = ref.substr(1);
    size_t i = 0;
    if (!ptr.empty() && ptr[0] != '/') fail(where, "$ref '" + ref + "': expected a JSON pointer after #");
    while (i < ptr.size()) {
      size_t j = ptr.find('/', i + 1);
      std::string part = ptr.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
      std::string key;
      for (size_t k = 0; k < part.size(); ++k) {
        if (part[k] == '~' && k + 1 < part.size()) {
          key += part[k + 1] == '1' ? '/' : '~';
          ++k;
        } else {
          key += part[k];
        }
      }
      if (node->is_object() && node->contains(key)) {
        node = &(*node)[key];
      } else if (node->is_array() && !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(key) < node->size()) {
        node = &(*node)[std::stoul(key)];
      } else {
        fail(where, "$ref '" + ref + "' points at nothing in this schema");
      }
      if (j == std::string::npos) break;
      i = j;
    }
    return *node;
  }

  std::string literal(const json& value) { return gbnf_literal(value.dump()); }

  std::string alternatives(const std::vector<std::string>& alts) {
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
  }

  std::optional<double> number_kw(const json& s, const char* key, const std::string& ptr) {
    if (!s.contains(key)) return std::nullopt;
    if (!s[key].is_number()) fail(ptr + "/" + key, "expected a number");
    return s[key].get<double>();
  }
  std::optional<int64_t> count_kw(const json& s, const char* key, const std::string& ptr) {
    if (!s.contains(key)) return std::nullopt;
    if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0) fail(ptr + "/" + key, "expected a non-negative integer");
    if (s[key].get<int64_t>() > 10000) fail(ptr + "/" + key, "at most 10000 is supported");
    return s[key].get<int64_t>();
  }

  std::string visit(const json& s, const std::string& ptr) {
    // Each level (a property, an item, a branch, a followed $ref) is one call deeper: a
    // chain of 10 000 $refs must be a 400 that names the limit, not a stack overflow.
    struct Level {
      int& depth;
      explicit Level(int& d) : depth(++d) {}
      ~Level() { --depth; }
    } level(depth_);
    if (depth_ > max_depth_)
      throw GrammarLimitError(fmt::format("{}: the schema nests deeper than {} levels (each $ref followed counts as one)",
                                          ptr.empty() ? "(root)" : ptr, max_depth_),
                              "--schema-max-depth");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(ptr, "the schema 'false' allows no value");
      return shared("value");
    }
    if (!s.is_object()) fail(ptr, "expected a schema (an object or a boolean)");
    for (auto& [key, v] : s.items())
      if (!supported().count(key) && !annotations().count(key))
        fail(ptr + "/" + escape_pointer(key), "unsupported JSON Schema keyword '" + key + "'");
    std::vector<std::string> constraining;
    for (auto& [key, v] : s.items())
      if (supported().count(key)) constraining.push_back(key);
    auto alone = [&](const char* kw) {
      for (const std::string& k : constraining)
        if (k != kw) fail(ptr + "/" + escape_pointer(k), "'" + k + "' together with '" + kw + "' is not supported");
    };

    if (s.contains("$ref")) {
      alone("$ref");
      if (!s["$ref"].is_string()) fail(ptr + "/$ref", "expected a string");
      std::string ref = s["$ref"].get<std::string>();
      auto it = refs_.find(ref);
      if (it != refs_.end()) return it->second;
      const json& target = resolve(ref, ptr + "/$ref");  // checks the reference's form first
      std::string name = rule_safe("ref-" + ref.substr(ref.rfind('/') == std::string::npos ? 0 : ref.rfind('/') + 1)) +
                         "-" + std::to_string(++counter_);
      refs_[ref] = name;
      rules_[name] = "";  // reserved: the target may refer back to it
      rules_[name] = visit(target, ref.substr(1));
      return name;
    }
    if (s.contains("const") || s.contains("enum")) {
      // The listed values, those of the given type(s) if `type` is there too.
      const char* kw = s.contains("const") ? "const" : "enum";
      for (const std::string& k : constraining)
        if (k != kw && k != "type") fail(ptr + "/" + escape_pointer(k), "'" + k + "' together with '" + kw + "' is not supported");
      json values = s.contains("const") ? json::array({s["const"]}) : s["enum"];
      if (!values.is_array() || values.empty()) fail(ptr + "/enum", "expected a non-empty array");
      std::vector<std::string> alts;
      for (const json& v : values)
        if (!s.contains("type") || has_type(v, s["type"], ptr)) alts.push_back(literal(v));
      if (alts.empty()) fail(ptr + "/" + kw, "no value is of the schema's type");
      return alts.size() == 1 ? alts[0] : add_rule(hint(ptr), alternatives(alts));
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!s.contains(kw)) continue;
      alone(kw);
      if (!s[kw].is_array() || s[kw].empty()) fail(ptr + "/" + kw, "expected a non-empty array of schemas");
      std::vector<std::string> alts;
      for (size_t i = 0; i < s[kw].size(); ++i) alts.push_back(visit(s[kw][i], fmt::format("{}/{}/{}", ptr, kw, i)));
      return add_rule(hint(ptr), alternatives(alts));
    }
    if (s.contains("allOf")) {
      alone("allOf");
      if (!s["allOf"].is_array() || s["allOf"].size() != 1)
        fail(ptr + "/allOf", "only an allOf with exactly one schema is supported");
      return visit(s["allOf"][0], ptr + "/allOf/0");
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& x : t) {
          if (!x.is_string()) fail(ptr + "/type", "expected a type name or a list of them");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(ptr + "/type", "expected a type name or a list of them");
      }
    } else {
      // No type: the keywords say which kind of value is meant.
      auto has = [&](std::initializer_list<const char*> keys) {
        for (const char* k : keys)
          if (s.contains(k)) return true;
        return false;
      };
      if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (has({"items", "minItems", "maxItems"})) types.push_back("array");
      if (has({"pattern", "minLength", "maxLength", "format"})) types.push_back("string");
      if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
      if (types.empty()) return shared("value");
    }
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      if (t == "object") alts.push_back(object(s, ptr));
      else if (t == "array") alts.push_back(array(s, ptr));
      else if (t == "string") alts.push_back(string(s, ptr));
      else if (t == "integer" || t == "number") alts.push_back(number(s, ptr, t == "integer"));
      else if (t == "boolean") alts.push_back(shared("boolean"));
      else if (t == "null") alts.push_back(shared("null"));
      else fail(ptr + "/type", "unknown type '" + t + "'");
    }
    return alts.size() == 1 ? alts[0] : add_rule(hint(ptr), alternatives(alts));
  }

  // Whether JSON value v is of type t (a name or a list of names).
  static bool has_type(const json& v, const json& t, const std::string& ptr) {
    if (t.is_array()) {
      for (const json& x : t)
        if (has_type(v, x, ptr)) return true;
      return false;
    }
    if (!t.is_string()) fail(ptr + "/type", "expected a type name or a list of them");
    std::string n = t.get<std::string>();
    if (n == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (n == "number") return v.is_number();
    if (n == "string") return v.is_string();
    if (n == "boolean") return v.is_boolean();
    if (n == "null") return v.is_null();
    if (n == "object") return v.is_object();
    if (n == "array") return v.is_array();
    fail(ptr + "/type", "unknown type '" + n + "'");
  }

  static std::string hint(const std::string& ptr) {
    size_t slash = ptr.rfind('/');
    std::string last = slash == std::string::npos ? ptr : ptr.substr(slash + 1);
    return last.empty() ? "root" : last;
  }

  std::string object(const json& s, const std::string& ptr) {
    std::string w = shared("ws");
    std::vector<std::pair<std::string, std::string>> props;  // key, value expression
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(ptr + "/required", "expected an array of property names");
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail(ptr + "/required", "expected an array of property names");
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail(ptr + "/properties", "expected an object of schemas");
      for (auto& [key, sub] : s["properties"].items())
        props.emplace_back(key, visit(sub, ptr + "/properties/" + escape_pointer(key)));
    }
    for (const std::string& r : required) {
      bool declared = false;
      for (auto& p : props) declared |= p.first == r;
      if (!declared) props.emplace_back(r, shared("value"));
    }
    const json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (extra && !extra->is_boolean() && !extra->is_object())
      fail(ptr + "/additionalProperties", "expected a boolean or a schema");
    if (props.empty()) {
      if (extra && extra->is_boolean() && !extra->get<bool>()) return gbnf_literal("{") + " " + w + " " + gbnf_literal("}");
      std::string value = extra && extra->is_object() ? visit(*extra, ptr + "/additionalProperties") : shared("value");
      std::string kv = add_rule(hint(ptr) + "-kv", fmt::format("{} {} \":\" {} {}", shared("string"), w, w, value));
      return add_rule(hint(ptr), fmt::format("\"{{\" {0} ({1} ({0} \",\" {0} {1})*)? {0} \"}}\"", w, kv));
    }
    // Members in order; the comma goes before every member but the first one written.
    // tail_i: members i.. after something was written; head_i: members i.. with nothing yet.
    size_t n = props.size();
    std::vector<std::string> kv(n), tail(n + 1), head(n + 1);
    for (size_t i = 0; i < n; ++i)
      kv[i] = add_rule(hint(ptr) + "-" + props[i].first,
                       fmt::format("{} {} \":\" {} {}", gbnf_literal(json(props[i].first).dump()), w, w, props[i].second));
    tail[n] = "";
    head[n] = "";
    for (size_t i = n; i-- > 0;) {
      bool req = required.count(props[i].first) > 0;
      std::string member = fmt::format("{0} \",\" {0} {1}", w, kv[i]);
      std::string t = req ? member + " " + tail[i + 1] : "(" + member + ")? " + tail[i + 1];
      tail[i] = add_rule(hint(ptr) + "-tail", t);
      std::string h = kv[i] + " " + tail[i + 1];
      if (!req) h += " | " + (head[i + 1].empty() ? std::string("\"\"") : head[i + 1]);
      head[i] = add_rule(hint(ptr) + "-head", h);
    }
    return add_rule(hint(ptr), fmt::format("\"{{\" {0} {1} {0} \"}}\"", w, head[0]));
  }

  std::string array(const json& s, const std::string& ptr) {
    std::string w = shared("ws");
    if (s.contains("items") && s["items"].is_array())
      fail(ptr + "/items", "an array of item schemas (tuple form) is not supported");
    std::string item = s.contains("items") ? visit(s["items"], ptr + "/items") : shared("value");
    int64_t min = count_kw(s, "minItems", ptr).value_or(0);
    std::optional<int64_t> max = count_kw(s, "maxItems", ptr);
    if (max && *max < min) fail(ptr + "/maxItems", "is smaller than minItems");
    std::string open = gbnf_literal("["), close = gbnf_literal("]");
    if (max && *max == 0) return add_rule(hint(ptr), fmt::format("{} {} {}", open, w, close));
    std::string more = fmt::format("({0} \",\" {0} {1})", w, item);
    int64_t lo = std::max<int64_t>(min - 1, 0);
    std::string reps = max ? fmt::format("{{{},{}}}", lo, *max - 1) : fmt::format("{{{},}}", lo);
    std::string list = item + " " + more + reps;
    if (min == 0) list = "(" + list + ")?";
    return add_rule(hint(ptr), fmt::format("{0} {1} {2} {1} {3}", open, w, list, close));
  }

  std::string string(const json& s, const std::string& ptr) {
    bool has_len = s.contains("minLength") || s.contains("maxLength");
    std::string q = gbnf_literal("\"");
    if (s.contains("format")) {
      if (s.contains("pattern") || has_len) fail(ptr + "/format", "format together with pattern or length limits is not supported");
      if (!s["format"].is_string()) fail(ptr + "/format", "expected a string");
      std::string f = s["format"].get<std::string>();
      std::string body;
      const std::string date =
          "[1-9] [0-9]{3} \"-\" ((\"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\") \"-\" (\"0\" [1-9] | [12] "
          "[0-9] | \"3\" [01]) | (\"04\" | \"06\" | \"09\" | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02\" \"-\" "
          "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))";
      const std::string time =
          "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | \"2\" "
          "[0-3]) \":\" [0-5] [0-9])";
      if (f == "date") body = date;
      else if (f == "time") body = time;
      else if (f == "date-time") body = "(" + date + ") \"T\" (" + time + ")";
      else if (f == "uuid") body = "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}";
      else if (f == "email") body = "[a-zA-Z0-9] [a-zA-Z0-9._+-]{0,31} \"@\" [a-zA-Z0-9] [a-zA-Z0-9-]{0,31} (\".\" [a-zA-Z]{2,8}){1,2}";
      else fail(ptr + "/format", "format '" + f + "' is not supported (date, time, date-time, uuid, email)");
      return add_rule(hint(ptr), q + " " + body + " " + q);
    }
    if (s.contains("pattern")) {
      if (has_len) fail(ptr + "/pattern", "pattern together with minLength/maxLength is not supported");
      if (!s["pattern"].is_string()) fail(ptr + "/pattern", "expected a string");
      try {
        return add_rule(hint(ptr), q + " " + pattern_to_gbnf(s["pattern"].get<std::string>()) + " " + q);
      } catch (const PatternError& e) {
        fail(ptr + "/pattern", std::string("regular expression ") + e.what());
      }
    }
    if (has_len) {
      int64_t min = count_kw(s, "minLength", ptr).value_or(0);
      std::optional<int64_t> max = count_kw(s, "maxLength", ptr);
      if (max && *max < min) fail(ptr + "/maxLength", "is smaller than minLength");
      std::string reps = max ? fmt::format("{{{},{}}}", min, *max) : fmt::format("{{{},}}", min);
      return add_rule(hint(ptr), q + " " + shared("char") + reps + " " + q);
    }
    return shared("string");
  }

  std::string number(const json& s, const std::string& ptr, bool integer) {
    std::optional<double> min = number_kw(s, "minimum", ptr), max = number_kw(s, "maximum", ptr);
    std::optional<double> xmin = number_kw(s, "exclusiveMinimum", ptr), xmax = number_kw(s, "exclusiveMaximum", ptr);
    if (!min && !max && !xmin && !xmax) return shared(integer ? "integer" : "number");
    // The bounds as an integer range [lo, hi] inside them.
    const double limit = 1e15;
    std::optional<int64_t> lo, hi;
    auto raise = [&](int64_t v) { lo = lo ? std::max(*lo, v) : v; };
    auto lower = [&](int64_t v) { hi = hi ? std::min(*hi, v) : v; };
    if (min && std::fabs(*min) < limit) raise(int64_t(std::ceil(*min)));
    if (xmin && std::fabs(*xmin) < limit) raise(int64_t(std::floor(*xmin)) + 1);
    if (max && std::fabs(*max) < limit) lower(int64_t(std::floor(*max)));
    if (xmax && std::fabs(*xmax) < limit) lower(int64_t(std::ceil(*xmax)) - 1);
    for (auto [v, key] : {std::pair{min, "minimum"}, {max, "maximum"}, {xmin, "exclusiveMinimum"}, {xmax, "exclusiveMaximum"}})
      if (v && std::fabs(*v) >= limit) fail(ptr + "/" + key, "bounds beyond 1e15 are not supported");
    if (lo && hi && *lo > *hi)
      fail(ptr, "no integer lies within the bounds (ranges without an integer are not supported)");
    std::string ints = integer_range(lo, hi);
    if (integer) return add_rule(hint(ptr), ints);
    // Decimals k.ddd with k in [max(lo, 0), hi - 1]: strictly inside the bounds.
    std::optional<int64_t> flo = lo ? std::max<int64_t>(*lo, 0) : 0, fhi = hi ? std::optional<int64_t>(*hi - 1) : std::nullopt;
    std::string body = ints;
    if (!fhi || *flo <= *fhi) body += " | " + integer_range(flo, fhi) + " \".\" [0-9]{1,6}";
    return add_rule(hint(ptr), body);
  }

  const json& root_;
  Whitespace ws_;
  int max_depth_;
  int depth_ = 0;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
  int counter_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const json& schema, Whitespace ws, const GrammarLimits& limits) {
  return Compiler(schema, ws, limits.schema_max_depth).compile();
}

}  // namespace nextn::grammar
