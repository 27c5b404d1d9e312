// chat/jinja_parse.cc — the recursive-descent Jinja parser (statements, and expressions
// with Jinja2's operator precedence) over the tokens of chat/jinja_lex.h.
#include <algorithm>
#include <charconv>

#include "chat/jinja_ast.h"
#include "chat/jinja_lex.h"
#include "util/error.h"

namespace nextn::jinja {

namespace {

// How deeply a template may nest. Every recursive descent (sub-expression, nested
// block) and every link of a left-leaning chain (a + b + c, x.y.z, x|f|g) adds a level,
// so no parsed tree is taller than this and walking it (rendering, freeing) stays far
// from the stack's end. Real chat templates nest below 40.
constexpr int kMaxNesting = 256;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_all() {
    std::vector<std::string> none;
    Body body = parse_body(none);
    if (peek().type != Token::Type::kEnd) error(peek(), "unexpected tag");
    return body;
  }

 private:
  // Levels held by one parsing function; released when it returns.
  struct Nest {
    Parser& p;
    int levels = 0;
    explicit Nest(Parser& parser) : p(parser) {}
    void add(const Token& at) {
      ++levels;
      if (++p.depth_ > kMaxNesting) p.error(at, fmt::format("template nests deeper than {} levels", kMaxNesting));
    }
    ~Nest() { p.depth_ -= levels; }
  };

  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  [[noreturn]] void error(const Token& tok, const std::string& what) const {
    fail(ErrorKind::kBadInput, "chat template: line {}, column {}: {}", tok.line, tok.col, what);
  }
  bool is_op(const std::string& op, size_t k = 0) const { return peek(k).type == Token::Type::kOp && peek(k).text == op; }
  bool is_name(const std::string& n, size_t k = 0) const { return peek(k).type == Token::Type::kName && peek(k).text == n; }
  void expect_op(const std::string& op) {
    if (!is_op(op)) error(peek(), fmt::format("expected '{}'", op));
    ++i_;
  }
  void expect_block_end() {
    if (peek().type != Token::Type::kBlockEnd) error(peek(), "expected end of statement block");
    ++i_;
  }
  int64_t int_literal(const Token& tok) const {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
    if (ec != std::errc() || end != tok.text.data() + tok.text.size())
      error(tok, fmt::format("integer literal {} does not fit in 64 bits", tok.text));
    return v;
  }
  std::string expect_name() {
    if (peek().type != Token::Type::kName) error(peek(), "expected a name");
    return next().text;
  }

  // Parses nodes until a block tag whose name is in `stops` (left unconsumed, i_ at its name).
  Body parse_body(const std::vector<std::string>& stops) {
    Body body;
    while (true) {
      const Token& tok = peek();
      if (tok.type == Token::Type::kEnd) {
        if (!stops.empty()) error(tok, fmt::format("unexpected end of template, expected '{}'", stops[0]));
        return body;
      }
      if (tok.type == Token::Type::kText) {
        auto n = std::make_shared<Node>();
        n->kind = Node::Kind::kText;
        n->text = tok.text;
        ++i_;
        body.push_back(n);
      } else if (tok.type == Token::Type::kVarBegin) {
        ++i_;
        auto n = std::make_shared<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = tok.line;
        n->col = tok.col;
        n->expr = parse_expression();
        if (peek().type != Token::Type::kVarEnd) error(peek(), "expected '}}'");
        ++i_;
        body.push_back(n);
      } else if (tok.type == Token::Type::kBlockBegin) {
        const Token& name = peek(1);
        if (name.type == Token::Type::kName && std::find(stops.begin(), stops.end(), name.text) != stops.end()) {
          ++i_;
          return body;
        }
        ++i_;
        body.push_back(parse_statement());
      } else {
        error(tok, "unexpected token");
      }
    }
  }

  NodePtr parse_statement() {
    const Token& tok = peek();
    Nest nest(*this);
    nest.add(tok);
    std::string kw = expect_name();
    auto n = std::make_shared<Node>();
    n->line = tok.line;
    n->col = tok.col;
    if (kw == "if") {
      n->kind = Node::Kind::kIf;
      ExprPtr cond = parse_expression();
      expect_block_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"});
        n->branches.emplace_back(cond, std::move(b));
        std::string k = expect_name();
        if (k == "elif") {
          cond = parse_expression();
          expect_block_end();
          continue;
        }
        if (k == "else") {
          expect_block_end();
          n->else_body = parse_body({"endif"});
          expect_name();
        }
        expect_block_end();
        return n;
      }
    }
    if (kw == "for") {
      n->kind = Node::Kind::kFor;
      n->targets.push_back(expect_name());
      while (is_op(",")) {
        ++i_;
        n->targets.push_back(expect_name());
      }
      if (!is_name("in")) error(peek(), "expected 'in'");
      ++i_;
      n->expr = parse_or_cond(false);
      if (is_name("if")) {
        ++i_;
        n->condition = parse_expression();
      }
      if (is_name("recursive")) error(peek(), "recursive loops are not supported");
      expect_block_end();
      n->body = parse_body({"else", "endfor"});
      if (expect_name() == "else") {
        expect_block_end();
        n->else_body = parse_body({"endfor"});
        expect_name();
      }
      expect_block_end();
      return n;
    }
    if (kw == "set") {
      std::string first = expect_name();
      if (is_op(".")) {
        ++i_;
        auto obj = std::make_shared<Expr>();
        obj->kind = Expr::Kind::kName;
        obj->name = first;
        n->target_object = obj;
        n->targets.push_back(expect_name());
      } else {
        n->targets.push_back(first);
        while (is_op(",")) {
          ++i_;
          n->targets.push_back(expect_name());
        }
      }
      if (peek().type == Token::Type::kBlockEnd && !n->target_object) {
        ++i_;
        n->kind = Node::Kind::kSetBlock;
        n->body = parse_body({"endset"});
        expect_name();
        expect_block_end();
        return n;
      }
      n->kind = Node::Kind::kSet;
      expect_op("=");
      n->expr = parse_tuple_or_expression();
      expect_block_end();
      return n;
    }
    if (kw == "macro") {
      n->kind = Node::Kind::kMacro;
      n->name = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        n->targets.push_back(expect_name());
        if (is_op("=")) {
          ++i_;
          n->defaults.push_back(parse_expression());
        } else {
          n->defaults.push_back(nullptr);
        }
        if (is_op(",")) ++i_;
        else if (!is_op(")")) error(peek(), "expected ',' or ')'");
      }
      ++i_;
      expect_block_end();
      n->body = parse_body({"endmacro"});
      expect_name();
      if (peek().type == Token::Type::kName) ++i_;  // {% endmacro name %}
      expect_block_end();
      return n;
    }
    if (kw == "break" || kw == "continue") {
      n->kind = kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      expect_block_end();
      return n;
    }
    if (kw == "filter") {
      n->kind = Node::Kind::kFilterBlock;
      n->expr = parse_filter_tail(nullptr);
      expect_block_end();
      n->body = parse_body({"endfilter"});
      expect_name();
      expect_block_end();
      return n;
    }
    if (kw == "generation") {  // transformers' assistant-mask extension: renders its body
      n->kind = Node::Kind::kPlain;
      expect_block_end();
      n->body = parse_body({"endgeneration"});
      expect_name();
      expect_block_end();
      return n;
    }
    if (kw == "do") {
      n->kind = Node::Kind::kPlain;
      auto out = std::make_shared<Node>();
      out->kind = Node::Kind::kSet;
      out->targets.push_back("_");
      out->expr = parse_expression();
      n->body.push_back(out);
      expect_block_end();
      return n;
    }
    error(tok, fmt::format("unknown or unsupported tag '{}'", kw));
  }

  ExprPtr make(Expr::Kind kind, const Token& at) {
    auto e = std::make_shared<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // "a, b" at statement level (set x = 1, 2) makes a tuple.
  ExprPtr parse_tuple_or_expression() {
    const Token& at = peek();
    ExprPtr first = parse_expression();
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::kTuple, at);
    t->children.push_back(first);
    while (is_op(",")) {
      ++i_;
      t->children.push_back(parse_expression());
    }
    return t;
  }

  ExprPtr parse_expression() { return parse_or_cond(true); }

  ExprPtr parse_or_cond(bool allow_cond) {
    const Token& at = peek();
    Nest nest(*this);
    nest.add(at);
    ExprPtr e = parse_or();
    if (allow_cond && is_name("if")) {
      ++i_;
      auto c = make(Expr::Kind::kCond, at);
      c->children.push_back(e);
      c->children.push_back(parse_or());
      if (is_name("else")) {
        ++i_;
        c->children.push_back(parse_or_cond(true));
      } else {
        c->children.push_back(nullptr);
      }
      return c;
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, const Token& at) {
    auto e = make(Expr::Kind::kBinary, at);
    e->name = op;
    e->children = {std::move(a), std::move(b)};
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    Nest nest(*this);
    while (is_name("or")) {
      const Token& at = next();
      nest.add(at);
      e = binary("or", e, parse_and(), at);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    Nest nest(*this);
    while (is_name("and")) {
      const Token& at = next();
      nest.add(at);
      e = binary("and", e, parse_not(), at);
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      const Token& at = next();
      Nest nest(*this);
      nest.add(at);
      auto e = make(Expr::Kind::kUnary, at);
      e->name = "not";
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    Nest nest(*this);
    while (true) {
      const Token& at = peek();
      std::string op;
      if (at.type == Token::Type::kOp && (at.text == "==" || at.text == "!=" || at.text == "<" || at.text == ">" ||
                                          at.text == "<=" || at.text == ">=")) {
        op = at.text;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        i_ += 2;
      } else {
        return e;
      }
      nest.add(at);
      e = binary(op, e, parse_math1(), at);
    }
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    Nest nest(*this);
    while (is_op("+") || is_op("-")) {
      const Token& at = next();
      nest.add(at);
      e = binary(at.text, e, parse_concat(), at);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    Nest nest(*this);
    while (is_op("~")) {
      const Token& at = next();
      nest.add(at);
      e = binary("~", e, parse_math2(), at);
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    Nest nest(*this);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = next();
      nest.add(at);
      e = binary(at.text, e, parse_pow(), at);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    Nest nest(*this);
    while (is_op("**")) {
      const Token& at = next();
      nest.add(at);
      e = binary("**", e, parse_unary(true), at);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    if (is_op("-") || is_op("+")) {
      const Token& at = next();
      Nest nest(*this);
      nest.add(at);
      auto e = make(Expr::Kind::kUnary, at);
      e->name = at.text;
      e->children.push_back(parse_unary(false));
      return with_filter ? parse_filter_tail(e) : e;
    }
    ExprPtr e = parse_postfix(parse_primary());
    return with_filter ? parse_filter_tail(e) : e;
  }

  void parse_call_args(ExprPtr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().type == Token::Type::kName && is_op("=", 1)) {
        call->kwnames.push_back(next().text);
        ++i_;
      } else {
        call->kwnames.push_back("");
      }
      call->children.push_back(parse_expression());
      if (is_op(",")) ++i_;
      else if (!is_op(")")) error(peek(), "expected ',' or ')'");
    }
    ++i_;
  }

  // Filters and tests after an operand (operand may be null for {% filter %} blocks).
  ExprPtr parse_filter_tail(ExprPtr e) {
    bool first_bare = e == nullptr;
    Nest nest(*this);
    while (true) {
      nest.add(peek());
      if (is_op("|") || first_bare) {
        if (!first_bare) ++i_;
        first_bare = false;
        const Token& at = peek();
        auto f = make(Expr::Kind::kFilter, at);
        f->name = expect_name();
        while (is_op(".")) {
          ++i_;
          f->name += "." + expect_name();
        }
        f->children.push_back(e);
        if (is_op("(")) parse_call_args(f);
        e = f;
      } else if (is_name("is")) {
        const Token& at = next();
        auto t = make(Expr::Kind::kTest, at);
        if (is_name("not")) {
          ++i_;
          t->negate = true;
        }
        t->name = expect_name();
        t->children.push_back(e);
        if (is_op("(")) {
          parse_call_args(t);
        } else {
          const Token& n = peek();
          bool starts_arg = n.type == Token::Type::kString || n.type == Token::Type::kInt || n.type == Token::Type::kFloat ||
                            (n.type == Token::Type::kName && n.text != "and" && n.text != "or" && n.text != "else" &&
                             n.text != "if" && n.text != "not" && n.text != "in" && n.text != "is") ||
                            is_op("[") || is_op("{");
          if (starts_arg) {
            t->kwnames.push_back("");
            t->children.push_back(parse_postfix(parse_primary()));
          }
        }
        e = t;
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_postfix(ExprPtr e) {
    Nest nest(*this);
    while (true) {
      const Token& at = peek();
      nest.add(at);
      if (is_op(".")) {
        ++i_;
        auto a = make(Expr::Kind::kAttr, at);
        if (peek().type == Token::Type::kInt) {
          a->kind = Expr::Kind::kIndex;
          auto lit = make(Expr::Kind::kLiteral, peek());
          lit->value = Value(int_literal(next()));
          a->children = {e, lit};
        } else {
          a->name = expect_name();
          a->children.push_back(e);
        }
        e = a;
      } else if (is_op("[")) {
        ++i_;
        ExprPtr parts[3];
        int n_colons = 0;
        while (!is_op("]")) {
          if (is_op(":")) {
            ++i_;
            if (++n_colons > 2) error(peek(), "too many ':' in slice");
          } else {
            parts[n_colons] = parse_expression();
          }
        }
        ++i_;
        if (n_colons == 0) {
          if (!parts[0]) error(at, "empty subscript");
          auto ix = make(Expr::Kind::kIndex, at);
          ix->children = {e, parts[0]};
          e = ix;
        } else {
          auto sl = make(Expr::Kind::kSlice, at);
          sl->children = {e, parts[0], parts[1], parts[2]};
          e = sl;
        }
      } else if (is_op("(")) {
        auto call = make(Expr::Kind::kCall, at);
        call->line = e->line;  // report calls at the callee
        call->col = e->col;
        call->children.push_back(e);
        parse_call_args(call);
        e = call;
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_primary() {
    const Token& tok = peek();
    switch (tok.type) {
      case Token::Type::kName: {
        ++i_;
        auto e = make(Expr::Kind::kLiteral, tok);
        if (tok.text == "true" || tok.text == "True") e->value = Value(true);
        else if (tok.text == "false" || tok.text == "False") e->value = Value(false);
        else if (tok.text == "none" || tok.text == "None") e->value = Value::none();
        else {
          e->kind = Expr::Kind::kName;
          e->name = tok.text;
        }
        return e;
      }
      case Token::Type::kString: {
        auto e = make(Expr::Kind::kLiteral, tok);
        std::string s;
        while (peek().type == Token::Type::kString) s += next().text;  // adjacent literals concatenate
        e->value = Value(s);
        return e;
      }
      case Token::Type::kInt: {
        ++i_;
        auto e = make(Expr::Kind::kLiteral, tok);
        e->value = Value(int_literal(tok));
        return e;
      }
      case Token::Type::kFloat: {
        ++i_;
        auto e = make(Expr::Kind::kLiteral, tok);
        e->value = Value(std::strtod(tok.text.c_str(), nullptr));  // out of range -> inf, as Python
        return e;
      }
      case Token::Type::kOp: {
        if (tok.text == "(") {
          ++i_;
          if (is_op(")")) {
            ++i_;
            return make(Expr::Kind::kTuple, tok);
          }
          ExprPtr first = parse_expression();
          if (is_op(")")) {
            ++i_;
            return first;
          }
          auto t = make(Expr::Kind::kTuple, tok);
          t->children.push_back(first);
          while (is_op(",")) {
            ++i_;
            if (is_op(")")) break;
            t->children.push_back(parse_expression());
          }
          expect_op(")");
          return t;
        }
        if (tok.text == "[") {
          ++i_;
          auto l = make(Expr::Kind::kList, tok);
          while (!is_op("]")) {
            l->children.push_back(parse_expression());
            if (is_op(",")) ++i_;
            else if (!is_op("]")) error(peek(), "expected ',' or ']'");
          }
          ++i_;
          return l;
        }
        if (tok.text == "{") {
          ++i_;
          auto d = make(Expr::Kind::kDict, tok);
          while (!is_op("}")) {
            d->children.push_back(parse_expression());
            expect_op(":");
            d->children.push_back(parse_expression());
            if (is_op(",")) ++i_;
            else if (!is_op("}")) error(peek(), "expected ',' or '}'");
          }
          ++i_;
          return d;
        }
        break;
      }
      default: break;
    }
    error(tok, tok.type == Token::Type::kBlockEnd || tok.type == Token::Type::kVarEnd ? "unexpected end of tag"
                                                                                       : fmt::format("unexpected '{}'", tok.text));
  }

  std::vector<Token> t_;
  int depth_ = 0;  // levels held by the parsing functions now running (see Nest)
  size_t i_ = 0;
};

}  // namespace

Body parse_template(const std::string& raw_source) {
  // Jinja2's default keep_trailing_newline=False drops one final newline.
  std::string source = raw_source;
  if (!source.empty() && source.back() == '\n') {
    source.pop_back();
    if (!source.empty() && source.back() == '\r') source.pop_back();
  }
  Parser parser(lex_template(source));
  return parser.parse_all();
}

}  // namespace nextn::jinja
