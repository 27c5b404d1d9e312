// chat/jinja_render.cc — the Jinja evaluator: scopes, statements, expressions and
// operators. Filters, tests, value methods and globals are looked up by name in the
// tables of chat/jinja_builtins.h; Python semantics come from chat/jinja_python.h.
#include <chrono>

#include "chat/jinja.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_python.h"
#include "util/error.h"

namespace nextn::jinja {

namespace {

struct Frame {
  std::map<std::string, Value> vars;
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const std::map<std::string, Value>& variables, const RenderLimits& limits)
      : limits_(limits), start_(std::chrono::steady_clock::now()) {
    frames_.emplace_back();
    install_globals(frames_.back().vars, [this](int64_t items) { charge(items); });
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
    if (units > limits_.max_steps - steps_)
      problem(fmt::format("render limit: more than {} evaluation steps (max_steps)", limits_.max_steps));
    steps_ += units;
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
  // What a binary operator is about to build, checked before it is built: repeated or
  // concatenated strings against the size limit, copied list items against the steps.
  void check_operands(const std::string& op, const Value& a, const Value& b) {
    if (op == "+" && a.is_string() && b.is_string()) check_size(a.str().size() + b.str().size());
    if (op == "+" && a.is_list() && b.is_list()) charge(static_cast<int64_t>(a.list().size() + b.list().size()));
    if (op != "*") return;
    const Value& seq = a.is_string() || a.is_list() ? a : b;
    const Value& count = &seq == &a ? b : a;
    if (!(seq.is_string() || seq.is_list()) || !(count.is_int() || count.is_bool())) return;
    int64_t n = std::max<int64_t>(count.as_int(), 0);
    int64_t len = static_cast<int64_t>(seq.is_string() ? seq.str().size() : seq.list().size());
    bool huge = len > 0 && n > INT64_MAX / len;
    if (seq.is_string()) check_size(huge ? SIZE_MAX : static_cast<size_t>(n * len));
    else charge(huge ? INT64_MAX : n * len);
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

  [[noreturn]] void error_at(int line, int col, const std::string& msg) const {
    fail(ErrorKind::kBadInput, "chat template: line {}, column {}: {}", line, col, msg);
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
      if (v.is_string()) check_size(v.str().size());
      return v;
    } catch (const RuntimeProblem& p) {
      error_at(e.line, e.col, p.message);
    }
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
        if (op == "in") return Value(python_contains(b, a));
        if (op == "not in") return Value(!python_contains(b, a));
        check_operands(op, a, b);
        return binary_arith(op, a, b);
      }
      case Expr::Kind::kCond: {
        if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
        return e.children[2] ? eval(*e.children[2]) : Value();
      }
    }
    return Value();
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
