// chat/jinja_parse.cc — Jinja lexer (whitespace control: trim_blocks, lstrip_blocks,
// "-"/"+" modifiers, comments, raw blocks) and recursive-descent parser with Jinja2's
// operator precedence.
#include <algorithm>
#include <charconv>

#include "chat/jinja_ast.h"
#include "util/error.h"

namespace nextn::jinja {

namespace {

struct Token {
  enum class Type { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
  Type type;
  std::string text;
  int line = 0, col = 0;
};

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool strip_next = false;  // previous tag ended with "-": strip leading whitespace
    while (pos <= src_.size()) {
      size_t open = find_open(pos);
      std::string text = src_.substr(pos, (open == std::string::npos ? src_.size() : open) - pos);
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && isspace(static_cast<unsigned char>(text[k]))) ++k;
        text.erase(0, k);
      }
      strip_next = false;
      if (open == std::string::npos) {
        if (!text.empty()) push_text(text, pos);
        break;
      }
      char kind = src_[open + 1];
      char mod = open + 2 < src_.size() ? src_[open + 2] : 0;
      if (mod == '-') {
        size_t k = text.size();
        while (k > 0 && isspace(static_cast<unsigned char>(text[k - 1]))) --k;
        text.erase(k);
      } else if ((kind == '%' || kind == '#') && mod != '+') {
        // lstrip_blocks: remove spaces/tabs between the line start and the tag.
        size_t nl = text.rfind('\n');
        size_t from = nl == std::string::npos ? 0 : nl + 1;
        bool line_start = nl != std::string::npos || pos == 0 || src_[pos - 1] == '\n';
        if (line_start && text.find_first_not_of(" \t", from) == std::string::npos) text.erase(from);
      }
      if (!text.empty()) push_text(text, pos);
      size_t inner = open + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      bool trim_newline = false;
      if (kind == '#') {
        size_t close = src_.find("#}", inner);
        if (close == std::string::npos) error_at(open, "unterminated comment");
        strip_next = close > inner && src_[close - 1] == '-';
        pos = close + 2;
        trim_newline = !(close > inner && src_[close - 1] == '+');
      } else {
        bool block = kind == '%';
        tokens_.push_back({block ? Token::Type::kBlockBegin : Token::Type::kVarBegin, "", line_of(open), col_of(open)});
        size_t first_token = tokens_.size();
        pos = lex_tag(inner, block ? '%' : '}', strip_next, trim_newline);
        tokens_.push_back({block ? Token::Type::kBlockEnd : Token::Type::kVarEnd, "", line_of(pos), col_of(pos)});
        if (!block) trim_newline = false;
        if (block && tokens_.size() > first_token && tokens_[first_token].type == Token::Type::kName &&
            tokens_[first_token].text == "raw") {
          pos = lex_raw(pos, trim_newline && !strip_next, strip_next);
          strip_next = last_raw_strip_;
          trim_newline = last_raw_trim_;
        }
      }
      if (trim_newline && !strip_next && pos < src_.size() && src_[pos] == '\n') ++pos;
    }
    tokens_.push_back({Token::Type::kEnd, "", line_of(src_.size()), col_of(src_.size())});
    return std::move(tokens_);
  }

  int line_of(size_t off) const {
    return static_cast<int>(std::upper_bound(line_starts_.begin(), line_starts_.end(), off) - line_starts_.begin());
  }
  int col_of(size_t off) const { return static_cast<int>(off - line_starts_[line_of(off) - 1]) + 1; }

  [[noreturn]] void error_at(size_t off, const std::string& what) const {
    fail(ErrorKind::kBadInput, "chat template: line {}, column {}: {}", line_of(off), col_of(off), what);
  }

 private:
  size_t find_open(size_t from) const {
    size_t p = from;
    while ((p = src_.find('{', p)) != std::string::npos) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
      ++p;
    }
    return std::string::npos;
  }

  void push_text(const std::string& text, size_t off) {
    tokens_.push_back({Token::Type::kText, text, line_of(off), col_of(off)});
  }

  // Lexes expression tokens up to the closer ("%}" or "}}"); returns the offset after it.
  size_t lex_tag(size_t p, char closer, bool& strip_after, bool& trim_newline) {
    while (true) {
      while (p < src_.size() && isspace(static_cast<unsigned char>(src_[p]))) ++p;
      if (p >= src_.size()) error_at(p, "unterminated tag");
      char c = src_[p];
      // Closer, possibly with a "-" or "+" modifier.
      if ((c == '-' || c == '+') && p + 2 < src_.size() + 1 && src_[p + 1] == closer && p + 2 < src_.size() + 1 &&
          src_.compare(p + 1, 2, std::string(1, closer) + "}") == 0) {
        strip_after = c == '-';
        trim_newline = c != '+';
        return p + 3;
      }
      if (c == closer && p + 1 < src_.size() && src_[p + 1] == '}') {
        trim_newline = true;
        return p + 2;
      }
      int line = line_of(p), col = col_of(p);
      if (isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t b = p;
        while (p < src_.size() && (isalnum(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
        tokens_.push_back({Token::Type::kName, src_.substr(b, p - b), line, col});
      } else if (isdigit(static_cast<unsigned char>(c))) {
        size_t b = p;
        bool is_float = false;
        while (p < src_.size() && (isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
        if (p + 1 < src_.size() && src_[p] == '.' && isdigit(static_cast<unsigned char>(src_[p + 1]))) {
          is_float = true;
          ++p;
          while (p < src_.size() && isdigit(static_cast<unsigned char>(src_[p]))) ++p;
        }
        if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
          size_t q = p + 1;
          if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
          if (q < src_.size() && isdigit(static_cast<unsigned char>(src_[q]))) {
            is_float = true;
            p = q;
            while (p < src_.size() && isdigit(static_cast<unsigned char>(src_[p]))) ++p;
          }
        }
        std::string num = src_.substr(b, p - b);
        num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
        tokens_.push_back({is_float ? Token::Type::kFloat : Token::Type::kInt, num, line, col});
      } else if (c == '\'' || c == '"') {
        tokens_.push_back({Token::Type::kString, lex_string(p), line, col});
      } else {
        static const char* two[] = {"**", "//", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* t : two)
          if (src_.compare(p, 2, t) == 0) op = t;
        if (std::string("+-*/%~<>=()[]{},.:|!").find(c) == std::string::npos) error_at(p, fmt::format("unexpected character '{}'", c));
        p += op.size();
        tokens_.push_back({Token::Type::kOp, op, line, col});
      }
    }
  }

  std::string lex_string(size_t& p) {
    char q = src_[p++];
    std::string out;
    while (true) {
      if (p >= src_.size()) error_at(p, "unterminated string");
      char c = src_[p++];
      if (c == q) return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (p >= src_.size()) error_at(p, "unterminated string");
      char e = src_[p++];
      auto hex = [&](int n) {
        if (p + n > src_.size()) error_at(p, "bad escape");
        uint32_t v = 0;
        auto [end, ec] = std::from_chars(src_.data() + p, src_.data() + p + n, v, 16);
        if (ec != std::errc() || end != src_.data() + p + n || v > 0x10FFFF) error_at(p, "bad escape");
        p += n;
        return v;
      };
      auto put = [&](char32_t cp) {
        if (cp < 0x80) out.push_back(static_cast<char>(cp));
        else if (cp < 0x800) { out.push_back(static_cast<char>(0xC0 | (cp >> 6))); out.push_back(static_cast<char>(0x80 | (cp & 0x3F))); }
        else if (cp < 0x10000) { out.push_back(static_cast<char>(0xE0 | (cp >> 12))); out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F))); out.push_back(static_cast<char>(0x80 | (cp & 0x3F))); }
        else { out.push_back(static_cast<char>(0xF0 | (cp >> 18))); out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F))); out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F))); out.push_back(static_cast<char>(0x80 | (cp & 0x3F))); }
      };
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '0': out.push_back('\0'); break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\n': break;
        case 'x': put(hex(2)); break;
        case 'u': put(hex(4)); break;
        case 'U': put(hex(8)); break;
        default: out.push_back('\\'); out.push_back(e);
      }
    }
  }

  // After "{% raw %}": the verbatim text up to "{% endraw %}".
  size_t lex_raw(size_t p, bool trim_first_newline, bool strip_first) {
    // Drop the "raw" block tokens just emitted.
    tokens_.pop_back();  // kBlockEnd
    tokens_.pop_back();  // raw
    tokens_.pop_back();  // kBlockBegin
    if (strip_first) while (p < src_.size() && isspace(static_cast<unsigned char>(src_[p]))) ++p;
    else if (trim_first_newline && p < src_.size() && src_[p] == '\n') ++p;
    size_t q = p;
    while (true) {
      q = src_.find("{%", q);
      if (q == std::string::npos) error_at(p, "missing endraw");
      size_t r = q + 2;
      bool strip_before = r < src_.size() && src_[r] == '-';
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) ++r;
      while (r < src_.size() && isspace(static_cast<unsigned char>(src_[r]))) ++r;
      if (src_.compare(r, 6, "endraw") != 0) { q += 2; continue; }
      r += 6;
      while (r < src_.size() && isspace(static_cast<unsigned char>(src_[r]))) ++r;
      last_raw_strip_ = r < src_.size() && src_[r] == '-';
      last_raw_trim_ = !(r < src_.size() && src_[r] == '+');
      if (src_[r] == '-' || src_[r] == '+') ++r;
      if (src_.compare(r, 2, "%}") != 0) error_at(r, "expected %} after endraw");
      std::string text = src_.substr(p, q - p);
      if (strip_before) {
        size_t k = text.size();
        while (k > 0 && isspace(static_cast<unsigned char>(text[k - 1]))) --k;
        text.erase(k);
      }
      if (!text.empty()) push_text(text, p);
      return r + 2;
    }
  }

  const std::string& src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  bool last_raw_strip_ = false, last_raw_trim_ = true;
};

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
  Lexer lexer(source);
  Parser parser(lexer.run());
  return parser.parse_all();
}

}  // namespace nextn::jinja
