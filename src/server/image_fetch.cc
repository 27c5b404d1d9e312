// server/image_fetch.cc — see image_fetch.h. cpp-httplib's client (built with OpenSSL
// by Debian, so https works) with its own redirect following off: each hop is checked here.
#include "server/image_fetch.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>

#include "util/error.h"

namespace nextn::server {
namespace {

struct Url {
  std::string origin;  // "scheme://host[:port]", lower-cased: what a redirect must keep
  std::string target;  // path and query ("/" when empty), without the fragment
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

Url parse_url(const std::string& url) {
  static const std::regex form(R"(^([A-Za-z]+)://([^/?#@\s]+)([/?][^#\s]*)?(#\S*)?$)");
  std::smatch m;
  if (url.size() > 4096 || !std::regex_match(url, m, form))
    fail(ErrorKind::kBadInput, "'{}' is not an http(s) URL this server fetches (scheme://host[:port]/path, no user "
         "name)", url.substr(0, 200));
  const std::string scheme = lower(m[1].str());
  if (scheme != "http" && scheme != "https")
    fail(ErrorKind::kBadInput, "'{}': only http and https images are fetched", url.substr(0, 200));
  Url out{scheme + "://" + lower(m[2].str()), m[3].matched ? m[3].str() : "/"};
  if (out.target.empty() || out.target[0] != '/') out.target = "/" + out.target;
  return out;
}

}  // namespace

FetchedImage fetch_remote_image(const std::string& url, size_t max_bytes, const RemoteImageOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::max(0.1, options.timeout_s)));
  Url where = parse_url(url);
  const std::string origin = where.origin;
  for (int hop = 0;; ++hop) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) fail(ErrorKind::kBadInput, "fetching {}: no answer within {} s", url.substr(0, 200), options.timeout_s);
    httplib::Client client(where.origin);
    const auto sec = time_t(left), usec = time_t((left - double(sec)) * 1e6);
    client.set_connection_timeout(sec, usec);
    client.set_read_timeout(sec, usec);
    client.set_write_timeout(sec, usec);
    client.set_follow_location(false);
    int status = 0;
    std::string location, media_type;
    FetchedImage out;
    bool too_big = false, too_slow = false;
    auto on_response = [&](const httplib::Response& r) {
      status = r.status;
      location = r.get_header_value("Location");
      media_type = lower(r.get_header_value("Content-Type"));
      if (const size_t semi = media_type.find(';'); semi != std::string::npos) media_type.resize(semi);
      if (status == 200 && r.has_header("Content-Length")) {
        try {
          too_big = std::stoull(r.get_header_value("Content-Length")) > max_bytes;
        } catch (const std::exception&) {
          too_big = false;  // an unreadable length: the body's own size decides below
        }
      }
      return status == 200 && !too_big;
    };
    auto on_body = [&](const char* data, size_t n) {
      too_slow = Clock::now() > deadline;  // a host dripping bytes keeps each read alive
      too_big = out.bytes.size() + n > max_bytes;
      if (too_big || too_slow) return false;
      out.bytes.append(data, n);
      return true;
    };
    httplib::Result result = client.Get(where.target, on_response, on_body);
    if (too_big) fail(ErrorKind::kBadInput, "fetching {}: the image is over {} bytes", url.substr(0, 200), max_bytes);
    if (too_slow) fail(ErrorKind::kBadInput, "fetching {}: no answer within {} s", url.substr(0, 200), options.timeout_s);
    if (status == 301 || status == 302 || status == 303 || status == 307 || status == 308) {
      if (hop >= options.max_redirects)
        fail(ErrorKind::kBadInput, "fetching {}: more than {} redirects", url.substr(0, 200), options.max_redirects);
      if (location.empty()) fail(ErrorKind::kBadInput, "fetching {}: a redirect without a Location", url.substr(0, 200));
      if (location[0] == '/' && (location.size() < 2 || location[1] != '/')) {
        where.target = location.substr(0, location.find('#'));
      } else {
        where = parse_url(location);
        if (where.origin != origin)
          fail(ErrorKind::kBadInput, "fetching {}: redirected to another host ({}), which is not followed",
               url.substr(0, 200), where.origin.substr(0, 200));
      }
      continue;
    }
    // A read or connection that outlasted the time left is the time limit, whatever the
    // library calls it.
    if (!result && Clock::now() + std::chrono::milliseconds(50) >= deadline)
      fail(ErrorKind::kBadInput, "fetching {}: no answer within {} s", url.substr(0, 200), options.timeout_s);
    if (status == 0)  // no answer at all: the connection's own error
      fail(ErrorKind::kBadInput, "fetching {}: {}", url.substr(0, 200), httplib::to_string(result.error()));
    if (status != 200) fail(ErrorKind::kBadInput, "fetching {}: the host answered HTTP {}", url.substr(0, 200), status);
    if (!result) fail(ErrorKind::kBadInput, "fetching {}: {}", url.substr(0, 200), httplib::to_string(result.error()));
    out.media_type = media_type;
    return out;
  }
}

}  // namespace nextn::server
