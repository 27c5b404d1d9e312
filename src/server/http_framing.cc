// server/http_framing.cc — see http_framing.h.
#include "server/http_framing.h"

#include <cctype>

namespace nextn::server {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

Framing check_head(const std::string& head) {
  Framing f;
  f.head_bytes = head.size();
  int lengths = 0, codings = 0;
  std::string coding;
  size_t line_start = head.find("\r\n") + 2;  // the request line is httplib's to parse
  if (head.substr(0, line_start - 2).find_first_of("\r\n") != std::string::npos) {
    f.status = 400;
    f.problem = "bare CR or LF in the request line";
    return f;
  }
  while (line_start + 2 < head.size()) {  // the last "\r\n" ends the head
    size_t end = head.find("\r\n", line_start);
    std::string line = head.substr(line_start, end - line_start);
    line_start = end + 2;
    auto refuse = [&](const std::string& why) {
      f.status = 400;
      f.problem = why;
      return f;
    };
    if (line.find_first_of("\r\n") != std::string::npos) return refuse("bare CR or LF in a header line");
    if (line[0] == ' ' || line[0] == '\t') return refuse("folded header line (obsolete line folding)");
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) return refuse("header line without a field name and ':'");
    std::string name = line.substr(0, colon);
    if (name.find_first_of(" \t") != std::string::npos) return refuse("whitespace before ':' in header '" + name + "'");
    std::string key = lower(name), value = trim(line.substr(colon + 1));
    if (key == "content-length") {
      if (++lengths > 1) return refuse("more than one Content-Length header");
      if (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos)
        return refuse("Content-Length '" + value + "' is not a byte count");
      f.content_length = std::stoll(value);
    } else if (key == "transfer-encoding") {
      if (++codings > 1) return refuse("more than one Transfer-Encoding header");
      coding = lower(value);
    } else if (key == "expect" && lower(value) == "100-continue") {
      f.expects_continue = true;
    }
  }
  f.chunked = codings && coding == "chunked";
  if (codings && lengths) {
    f.status = 400;
    f.problem = "both Content-Length and Transfer-Encoding";
  } else if (codings && coding != "chunked") {
    f.status = 501;
    f.problem = "Transfer-Encoding '" + coding + "' is not supported (only chunked)";
  }
  return f;
}

std::string with_content_length(const std::string& head, size_t length) {
  std::string out = head.substr(0, head.find("\r\n") + 2);
  for (size_t start = out.size(); start + 2 < head.size();) {
    size_t end = head.find("\r\n", start);
    std::string line = head.substr(start, end + 2 - start);
    start = end + 2;
    std::string key = lower(line.substr(0, line.find(':')));
    if (key != "content-length" && key != "transfer-encoding" && key != "expect") out += line;
  }
  return out + "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

bool httplib_reads_body(const std::string& head) {
  std::string method = head.substr(0, head.find(' '));
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" || method == "PRI";
}

ChunkedDecoder::Status ChunkedDecoder::resume(std::string_view bytes) {
  constexpr size_t kMaxLine = 4096;
  while (true) {
    size_t eol = bytes.find("\r\n", pos_);
    if (eol == std::string_view::npos) {
      if (bytes.size() - pos_ > kMaxLine) return fail(Status::kBad, "chunk size or trailer line longer than 4 KiB");
      return Status::kNeedMore;
    }
    std::string_view line = bytes.substr(pos_, eol - pos_);
    if (trailers_) {  // trailer fields, dropped; an empty line ends them
      pos_ = eol + 2;
      if (line.empty()) return Status::kDone;
      continue;
    }
    std::string_view digits = line.substr(0, line.find(';'));
    while (!digits.empty() && (digits.back() == ' ' || digits.back() == '\t')) digits.remove_suffix(1);
    if (digits.empty() || digits.size() > 15 || digits.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos)
      return fail(Status::kBad, "bad chunk size '" + std::string(line.substr(0, 32)) + "'");
    size_t size = std::stoull(std::string(digits), nullptr, 16);
    if (size == 0) {
      trailers_ = true;
      pos_ = eol + 2;
      continue;
    }
    if (body_.size() + size > max_body_)
      return fail(Status::kTooLarge, "request body larger than " + std::to_string(max_body_) + " bytes");
    size_t data = eol + 2;
    if (bytes.size() < data + size + 2) return Status::kNeedMore;  // this chunk again once it is whole
    if (bytes.substr(data + size, 2) != "\r\n") return fail(Status::kBad, "chunk data not followed by CRLF");
    body_.append(bytes.substr(data, size));
    pos_ = data + size + 2;
  }
}

}  // namespace nextn::server
