// server/image_fetch.h — fetching an image_url that names an http(s) address, for servers
// started with --allow-remote-images (off by default: fetching lets clients make the
// server open connections, including to hosts only it can reach). Bounded on every side a
// remote host controls: the body's size (checked as it arrives, not only from its
// Content-Length), the whole fetch's time, and redirects, which are followed only to the
// same scheme, host and port, at most three times.
#pragma once
#include <cstddef>
#include <string>

namespace nextn::server {

struct RemoteImageOptions {
  bool enabled = false;
  double timeout_s = 10;   // the whole fetch, connection to last byte
  int max_redirects = 3;
};

struct FetchedImage {
  std::string bytes;
  std::string media_type;  // the Content-Type's media type ("" when none was sent)
};

// GETs `url` (http:// or https://). Throws nextn::Error kBadInput naming the problem: a
// malformed URL, a refused redirect, a status other than 200, a body over `max_bytes`,
// the time limit, a connection error.
FetchedImage fetch_remote_image(const std::string& url, size_t max_bytes, const RemoteImageOptions& options);

}  // namespace nextn::server
