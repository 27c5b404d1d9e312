// server/http_framing.h — how the bytes of one HTTP/1.1 request are framed (RFC 9112), as
// functions of the bytes received so far, with no I/O: the checks on a request head that
// httplib does not make (each a way to smuggle a request past a proxy), the decoding of a
// chunked body under the body limit, and the rewrite into the one form httplib frames
// right (the whole body after one Content-Length). http_connection.cc reads the socket
// and calls these; the HTTP framing fuzzer calls them directly.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace nextn::server {

// What the framing check decided about a request head.
struct Framing {
  int status = 0;                  // 0: acceptable; else the error status to answer (-1: the client went)
  std::string problem;             // why, for the error body
  size_t head_bytes = 0;           // request line + headers + blank line
  long long content_length = -1;   // -1: no Content-Length header
  bool chunked = false;            // Transfer-Encoding: chunked
  bool expects_continue = false;   // Expect: 100-continue
};

// The checks on a complete head (it ends with "\r\n\r\n"): one Content-Length, never
// together with Transfer-Encoding, chunked as the only transfer coding, no header
// folding, no whitespace before the colon, no bare CR or LF → 400 (501 for a coding
// other than chunked).
Framing check_head(const std::string& head);

// `head` with its framing headers (Content-Length, Transfer-Encoding, Expect) replaced by
// one Content-Length: the form of a request whose body is already whole in the buffer.
std::string with_content_length(const std::string& head, size_t length);

// Whether httplib reads the body of a request with this head's method; it leaves any
// other request's body in the stream, where it would be taken for the next request.
bool httplib_reads_body(const std::string& head);

// Decodes a chunked body (hex size, optional extensions, CRLF, data, CRLF; a zero size,
// trailer lines, CRLF) as its bytes arrive: resume() with the body's bytes so far (from
// its first byte, growing between calls) goes on from where the last call stopped.
class ChunkedDecoder {
 public:
  enum class Status { kNeedMore, kDone, kBad, kTooLarge };
  explicit ChunkedDecoder(size_t max_body) : max_body_(max_body) {}

  Status resume(std::string_view bytes);
  std::string take_body() { return std::move(body_); }
  size_t end() const { return pos_; }  // kDone: the bytes the framing took
  const std::string& problem() const { return problem_; }

 private:
  Status fail(Status s, std::string why) {
    problem_ = std::move(why);
    return s;
  }
  size_t max_body_;
  size_t pos_ = 0;            // the next unread byte (a size line, data or a trailer line)
  bool trailers_ = false;     // past the zero-size chunk
  std::string body_;
  std::string problem_;
};

}  // namespace nextn::server
