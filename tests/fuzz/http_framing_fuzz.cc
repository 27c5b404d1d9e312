// tests/fuzz/http_framing_fuzz.cc — the bytes of an HTTP request as the server frames them
// (server/http_framing.h): the head's checks, the chunked decoder and the rewrite into
// one Content-Length. The first byte picks where the body arrives split in two; the rest
// is the request. Checked: no crash; a chunked body decodes the same whole or split, never
// past the body limit, never past the bytes given; a head that passes, rewritten with the
// decoded body's length, passes again with exactly that length and no other framing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/http_framing.h"

using namespace nextn::server;

namespace {

constexpr size_t kMaxBody = 4096;  // small, so that 413s are reached

struct Decoded {
  ChunkedDecoder::Status status;
  std::string body;
  size_t end = 0;
};

// Decodes `bytes`, first only its first `split` bytes (as if the rest had not arrived).
Decoded decode(const std::string& bytes, size_t split) {
  ChunkedDecoder d(kMaxBody);
  Decoded out;
  out.status = d.resume(std::string_view(bytes).substr(0, split));
  if (out.status == ChunkedDecoder::Status::kNeedMore) out.status = d.resume(bytes);
  if (out.status == ChunkedDecoder::Status::kDone) {
    out.end = d.end();
    out.body = d.take_body();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::string request(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t end = request.find("\r\n\r\n");
  if (end == std::string::npos) return 0;
  const std::string head = request.substr(0, end + 4), rest = request.substr(end + 4);
  Framing f = check_head(head);
  if (f.status != 0) return 0;
  std::string body;
  if (f.chunked) {
    Decoded whole = decode(rest, rest.size());
    Decoded split = decode(rest, rest.size() * data[0] / 255);
    if (whole.status != split.status || whole.body != split.body || whole.end != split.end) std::abort();
    if (whole.body.size() > kMaxBody || whole.end > rest.size()) std::abort();
    if (whole.status != ChunkedDecoder::Status::kDone) return 0;
    body = whole.body;
  } else if (f.content_length > 0) {
    body = rest.substr(0, size_t(f.content_length));
  }
  Framing again = check_head(with_content_length(head, body.size()));
  if (again.status != 0 || again.chunked || again.content_length != (long long)body.size()) std::abort();
  (void)httplib_reads_body(head);
  return 0;
}
