// tokenizer/utf8.cc — UTF-8 decoding, encoding and lossy repair.
#include "tokenizer/utf8.h"

namespace nextn::utf8 {

char32_t next(std::string_view s, size_t& i) {
  unsigned char c = s[i];
  if (c < 0x80) { ++i; return c; }
  int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
  char32_t cp = c & (0x3F >> n);
  ++i;
  for (int k = 0; k < n && i < s.size(); ++k, ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {
// Number of bytes of s[i..] that form a valid prefix of some UTF-8 sequence (the
// "maximal subpart"), and whether that prefix is a complete character.
struct Subpart {
  size_t length;
  bool complete;
};

Subpart subpart(std::string_view s, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80) return {1, true};
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) need = 1;
  else if (c == 0xE0) { need = 2; lo = 0xA0; }
  else if (c >= 0xE1 && c <= 0xEC) need = 2;
  else if (c == 0xED) { need = 2; hi = 0x9F; }
  else if (c >= 0xEE && c <= 0xEF) need = 2;
  else if (c == 0xF0) { need = 3; lo = 0x90; }
  else if (c >= 0xF1 && c <= 0xF3) need = 3;
  else if (c == 0xF4) { need = 3; hi = 0x8F; }
  else return {0, false};
  size_t k = 1;
  for (int j = 0; j < need; ++j, ++k) {
    if (i + k >= s.size()) return {k, false};
    unsigned char b = s[i + k];
    unsigned char l = j == 0 ? lo : 0x80, h = j == 0 ? hi : 0xBF;
    if (b < l || b > h) return {k, false};
  }
  return {k, true};
}
}  // namespace

size_t valid_sequence_length(std::string_view s, size_t i) {
  Subpart p = subpart(s, i);
  return p.complete ? p.length : 0;
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    if (c < 0x80) { ++i; continue; }
    size_t n = valid_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  if (is_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    Subpart p = subpart(s, i);
    if (p.complete) {
      out.append(s.substr(i, p.length));
      i += p.length;
    } else {
      out.append(kReplacement);
      i += p.length == 0 ? 1 : p.length;
    }
  }
  return out;
}

size_t complete_prefix_length(std::string_view s) {
  // Look back at most 3 bytes for the start of a trailing incomplete sequence.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    unsigned char c = s[i];
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    if (c < 0x80) return n;
    Subpart p = subpart(s, i);
    if (!p.complete && i + p.length == n) return i;  // valid so far, just unfinished
    return n;
  }
  return n;
}

}  // namespace nextn::utf8
