// chat/jinja_lex.cc — the Jinja lexer (see chat/jinja_lex.h).
#include "chat/jinja_lex.h"

#include <algorithm>
#include <charconv>

#include "util/error.h"

namespace nextn::jinja {

namespace {

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

}  // namespace

std::vector<Token> lex_template(const std::string& source) { return Lexer(source).run(); }

}  // namespace nextn::jinja
