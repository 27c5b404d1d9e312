// vision/data_url.cc — data: URL parsing and the base64 decoder it needs (no Debian
// library in the build has one: OpenSSL's would be a dependency for twenty lines).
#include "vision/data_url.h"

#include <array>

#include "util/error.h"

namespace nextn::vision {

namespace {

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// 0..63 for the alphabet, -1 otherwise.
constexpr std::array<int8_t, 256> kBase64 = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = int8_t(i);
  return t;
}();

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

bool is_data_url(std::string_view url) { return url.size() >= 5 && lower(url.substr(0, 5)) == "data:"; }

std::string decode_base64(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_space(c)) continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int v = kBase64[static_cast<unsigned char>(c)];
    if (v < 0 || padding > 0)
      fail(ErrorKind::kBadInput, "invalid base64: {} at offset {}",
           padding > 0 ? std::string("data after '=' padding") : fmt::format("character 0x{:02x}", uint8_t(c)), i);
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  // 6 leftover bits can never end a byte string; 2 or 4 are the tail of the last group.
  if (bits == 6) fail(ErrorKind::kBadInput, "invalid base64: the text ends inside a byte");
  if (padding > 2) fail(ErrorKind::kBadInput, "invalid base64: {} '=' characters at the end", padding);
  return out;
}

DataUrl parse_data_url(std::string_view url, size_t max_bytes) {
  if (!is_data_url(url)) fail(ErrorKind::kBadInput, "not a data: URL");
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos)
    fail(ErrorKind::kBadInput, "malformed data: URL: no ',' between the media type and the data");
  // data:[<media type>][;param=value]*[;base64],<data>
  std::string_view header = url.substr(5, comma - 5);
  bool base64 = false;
  std::string_view type = header.substr(0, header.find(';'));
  for (size_t at = header.find(';'); at != std::string_view::npos;) {
    const size_t next = header.find(';', at + 1);
    std::string_view param = trim(header.substr(at + 1, next == std::string_view::npos ? next : next - at - 1));
    if (lower(param) == "base64") base64 = true;
    at = next;
  }
  DataUrl out;
  out.media_type = lower(trim(type));
  if (out.media_type.empty())
    fail(ErrorKind::kBadInput, "data: URL has no media type (expected e.g. data:image/png;base64,...)");
  if (!base64) fail(ErrorKind::kBadInput, "data: URL is not base64 (expected data:{};base64,...)", out.media_type);
  std::string_view payload = url.substr(comma + 1);
  // 4 characters carry 3 bytes: refuse before decoding what cannot fit.
  if (payload.size() / 4 * 3 > max_bytes + 3)
    fail(ErrorKind::kBadInput, "the image is about {} bytes; the limit is {}", payload.size() / 4 * 3, max_bytes);
  out.bytes = decode_base64(payload);
  return out;
}

std::string make_data_url(std::string_view media_type, std::string_view bytes) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out = "data:" + std::string(media_type) + ";base64,";
  out.reserve(out.size() + (bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? uint8_t(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

}  // namespace nextn::vision
