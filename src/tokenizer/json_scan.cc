// tokenizer/json_scan.cc — the minimal JSON reader behind fast tokenizer.json loading.
#include "tokenizer/json_scan.h"

#include <cstdint>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nextn {

void JsonScanner::error(std::string_view what) const {
  fail(ErrorKind::kBadInput, "{}: invalid JSON at byte {}: {}", file_, pos_, what);
}

void JsonScanner::skip_ws() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    ++pos_;
  }
}

char JsonScanner::peek() {
  skip_ws();
  return pos_ < text_.size() ? text_[pos_] : 0;
}

void JsonScanner::expect(char c) {
  if (peek() != c) error(std::string("expected '") + c + "'");
  ++pos_;
}

bool JsonScanner::consume(char c) {
  if (peek() != c) return false;
  ++pos_;
  return true;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string JsonScanner::read_string() {
  expect('"');
  std::string out;
  while (true) {
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\\') ++pos_;
    out.append(text_.substr(start, pos_ - start));
    if (pos_ >= text_.size()) error("unterminated string");
    if (text_[pos_] == '"') { ++pos_; return out; }
    ++pos_;  // backslash
    if (pos_ >= text_.size()) error("unterminated escape");
    char e = text_[pos_++];
    switch (e) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        auto read4 = [&]() -> char32_t {
          if (pos_ + 4 > text_.size()) error("short \\u escape");
          char32_t v = 0;
          for (int k = 0; k < 4; ++k) {
            int h = hex_value(text_[pos_++]);
            if (h < 0) error("bad \\u escape");
            v = v * 16 + h;
          }
          return v;
        };
        char32_t cp = read4();
        if (cp >= 0xD800 && cp <= 0xDBFF && pos_ + 6 <= text_.size() && text_[pos_] == '\\' &&
            text_[pos_ + 1] == 'u') {
          size_t save = pos_;
          pos_ += 2;
          char32_t lo = read4();
          if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          else pos_ = save;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // lone surrogate
        utf8::append(out, cp);
        break;
      }
      default: error("bad escape");
    }
  }
}

int64_t JsonScanner::read_int() {
  skip_ws();
  bool neg = false;
  if (pos_ < text_.size() && text_[pos_] == '-') { neg = true; ++pos_; }
  if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') error("expected an integer");
  int64_t v = 0;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    if (v > (INT64_MAX - 9) / 10) error("integer out of range");
    v = v * 10 + (text_[pos_++] - '0');
  }
  return neg ? -v : v;
}

std::string_view JsonScanner::skip_value() {
  skip_ws();
  size_t start = pos_;
  if (pos_ >= text_.size()) error("expected a value");
  char c = text_[pos_];
  if (c == '"') {
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') pos_ += text_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= text_.size()) error("unterminated string");
    ++pos_;
  } else if (c == '{' || c == '[') {
    int depth = 0;
    while (pos_ < text_.size()) {
      char d = text_[pos_];
      if (d == '"') {
        ++pos_;
        while (pos_ < text_.size() && text_[pos_] != '"') pos_ += text_[pos_] == '\\' ? 2 : 1;
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if (d == '}' || d == ']') {
        if (--depth == 0) { ++pos_; break; }
      }
      ++pos_;
    }
    if (depth != 0) error("unbalanced brackets");
  } else {
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '}' && text_[pos_] != ']' &&
           text_[pos_] != ' ' && text_[pos_] != '\n' && text_[pos_] != '\r' && text_[pos_] != '\t')
      ++pos_;
  }
  return text_.substr(start, pos_ - start);
}

}  // namespace nextn
