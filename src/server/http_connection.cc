// server/http_connection.cc — see http_connection.h.
#include "server/http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "server/api_error.h"
#include "server/http_framing.h"
#include "server/json_fields.h"

namespace nextn::server {

namespace {

constexpr size_t kMaxHeadBytes = 64 * 1024;      // request line + headers (431 beyond)
constexpr size_t kMaxReadAhead = 1 << 20;        // pipelined bytes buffered while a handler runs
constexpr double kHeadSeconds = 30;              // a request head must arrive within this (slow clients)
constexpr int kIdleSliceMs = 50;                 // how often an idle connection looks at the stop flag
constexpr int kLingerMs = 1000;                  // draining after our last response, before close()
constexpr const char* kProcessing = "HTTP/1.1 102 Processing\r\n\r\n";
constexpr const char* kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

using Clock = std::chrono::steady_clock;

int poll_fd(int fd, short events, int timeout_ms, short* revents = nullptr) {
  pollfd p{fd, events, 0};
  int r;
  do r = ::poll(&p, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (revents) *revents = r > 0 ? p.revents : 0;
  return r;
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
               : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ip.clear();
  port = 0;
  if (r != 0) return;
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    default: return "Error";
  }
}

// One accepted socket as an httplib::Stream whose read buffer lives as long as the
// connection (see the header for what that and the rest fix).
class Connection final : public httplib::Stream {
 public:
  Connection(int fd, double read_s, double write_s)
      : fd_(fd), read_ms_(int(read_s * 1000)), write_ms_(int(write_s * 1000)) {}

  bool is_readable() const override { return pos_ < buf_.size() || poll_fd(fd_, POLLIN, read_ms_) > 0; }

  // Writable within the timeout and not reset by the peer. The end of the client's input
  // is not a reason to stop writing (a half-closed client is still reading).
  bool is_writable() const override {
    short ev = 0;
    return poll_fd(fd_, POLLOUT, write_ms_, &ev) > 0 && !(ev & (POLLERR | POLLHUP | POLLNVAL));
  }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == buf_.size() && !fill(read_ms_)) return eof_ ? 0 : -1;
    size_t n = std::min(size, buf_.size() - pos_);
    std::memcpy(ptr, buf_.data() + pos_, n);
    pos_ += n;
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n > 0) response_started_ = true;
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

  // Waits for the first byte of the next request; false when the client closed, stayed
  // idle past `idle_s` or the server is stopping.
  bool next_request(double idle_s, const std::atomic<bool>& stopping) {
    auto deadline = Clock::now() + std::chrono::duration<double>(idle_s);
    while (pos_ == buf_.size()) {
      if (eof_ || stopping || Clock::now() > deadline) return false;
      fill(kIdleSliceMs);
    }
    return true;
  }

  // Buffers the whole request at the front, head and body, checks its framing and
  // rewrites it into the one form httplib frames right: the body whole (de-chunked) after
  // one Content-Length, and no body for methods whose body httplib would leave unread.
  // So a framing error is always found here (and the connection then closed: nothing
  // after it is a request), the body limit holds while reading, a POST without a length
  // has an empty body at once, and a stop ends a half-sent request at once.
  Framing frame(const std::atomic<bool>& stopping, size_t max_body) {
    response_started_ = probed_ = false;
    request_start_ = consumed_;
    auto deadline = Clock::now() + std::chrono::milliseconds(int(kHeadSeconds * 1000));
    size_t end;
    while ((end = buf_.find("\r\n\r\n", pos_)) == std::string::npos) {
      if (buf_.size() - pos_ > kMaxHeadBytes) return {431, "request head larger than 64 KiB"};
      if (int why = more(deadline, stopping)) return gave_up(why, "request head");
    }
    if (end + 4 - pos_ > kMaxHeadBytes) return {431, "request head larger than 64 KiB"};
    const std::string head = buf_.substr(pos_, end + 4 - pos_);
    Framing f = check_head(head);
    if (f.status != 0) return f;
    if (f.content_length > 0 && size_t(f.content_length) > max_body) return f;  // httplib answers 413 unread
    // Offsets from pos_: fill() may move the buffer's contents down while we wait.
    const size_t body_at = head.size();
    if (f.expects_continue && buf_.size() - pos_ == body_at && (f.chunked || f.content_length > 0))
      write(kContinue, std::strlen(kContinue));
    const bool keep_body = httplib_reads_body(head);
    size_t body_bytes = 0;  // the body's length once it is whole and plain
    if (f.chunked) {
      // The decoded body replaces head and chunk framing together.
      std::string body;
      size_t body_end = body_at;
      Framing bad = read_chunked(body_at, max_body, stopping, body, body_end);
      if (bad.status != 0) return bad;
      if (!keep_body) body.clear();
      body_bytes = body.size();
      std::string normal = with_content_length(head, body_bytes);
      f.head_bytes = normal.size();
      buf_.replace(pos_, body_end, normal + body);
    } else {
      // The body stays where it is in the buffer (up to max_body: not copied); only the
      // head is rewritten, and the body dropped where httplib would leave it unread.
      const size_t length = f.content_length > 0 ? size_t(f.content_length) : 0;
      while (buf_.size() - pos_ < body_at + length) {
        auto stall = Clock::now() + std::chrono::milliseconds(read_ms_);  // each arrival resets it
        if (int why = more(stall, stopping)) return gave_up(why, "request body (shorter than its Content-Length)");
      }
      body_bytes = keep_body ? length : 0;
      std::string normal = with_content_length(head, body_bytes);
      f.head_bytes = normal.size();
      buf_.replace(pos_, body_at + length - body_bytes, normal);
    }
    f.content_length = (long long)body_bytes;
    return f;
  }

  // Whether httplib read all of the request's body (it leaves it unread when it
  // refuses a request early, e.g. 413): if not, the next bytes are not a request.
  bool body_consumed(const Framing& f) const {
    return f.content_length < 0 || consumed_ - request_start_ >= f.head_bytes + size_t(f.content_length);
  }

  // Answers a request that cannot be framed, in the API's error shape, and closes.
  void refuse(int status, const std::string& problem) {
    ApiError e(status, "invalid_request_error", "Malformed HTTP request: " + problem, {}, "bad_http_framing");
    std::string body = dump_json(e.to_json());
    std::string text = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                       "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    write(text.data(), text.size());
  }

  // See client_disconnected().
  bool gone() {
    short ev = 0;
    if (poll_fd(fd_, POLLIN | POLLRDHUP, 0, &ev) <= 0) return false;
    if (ev & (POLLERR | POLLHUP | POLLNVAL)) return true;  // reset: the client closed and our bytes bounced
    if ((ev & POLLIN) && !eof_ && buf_.size() - pos_ < kMaxReadAhead) {
      char tmp[16 * 1024];
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n > 0) {  // a pipelined request: keep it for later
        buf_.append(tmp, size_t(n));
        return false;
      }
      if (n == 0) eof_ = true;
    }
    if (ev & POLLRDHUP) eof_ = true;
    // The client sent its end of input: it half-closed (and still reads) or it closed.
    // Only a write tells, because a closed socket answers it with a reset; before the
    // response has begun that write is an interim 102, which HTTP/1.1 clients skip.
    if (eof_ && !response_started_ && !probed_) {
      probed_ = true;
      ::send(fd_, kProcessing, std::strlen(kProcessing), MSG_NOSIGNAL);
    }
    return false;
  }

  // Ends the connection so that our last response is not lost to a reset: stop
  // sending, read what the client still sends for a moment, then close.
  void close_gracefully() {
    ::shutdown(fd_, SHUT_WR);
    auto deadline = Clock::now() + std::chrono::milliseconds(kLingerMs);
    char tmp[16 * 1024];
    size_t drained = 0;
    while (!eof_ && drained < kMaxReadAhead) {
      int left = int(std::chrono::duration<double, std::milli>(deadline - Clock::now()).count());
      if (left <= 0 || poll_fd(fd_, POLLIN, left) <= 0) break;
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) break;
      drained += size_t(n);
    }
    ::close(fd_);
  }

 private:
  // Waits for more of the request until `deadline`: 0 once bytes came, 408 at the
  // deadline, 400 when the client ended its input (half-closed) before the request was
  // whole, -1 when the connection failed or the server is stopping.
  int more(Clock::time_point deadline, const std::atomic<bool>& stopping) {
    while (true) {
      if (stopping) return -1;
      int left = int(std::chrono::duration<double, std::milli>(deadline - Clock::now()).count());
      if (left <= 0) return 408;
      if (fill(std::min(left, kIdleSliceMs))) return 0;
      if (eof_) return 400;
      if (poll_fd(fd_, POLLIN, 0) < 0) return -1;
    }
  }

  // The Framing for giving up on `part` of the request for more()'s reason `why`. A
  // client that closed (or half-closed) before sending any of this request gets no answer.
  Framing gave_up(int why, const std::string& part) const {
    if (why == 408) return {408, part + " not complete within 30 s"};
    if (why == 400 && buf_.size() > pos_) return {400, part + " ended before it was complete"};
    return {-1, "closed"};
  }

  // Reads the chunked body starting at buf_[pos_ + at] into `body`; `end`: the offset
  // (from pos_) just past its framing. A Framing with a status when it is malformed (400), too large (413,
  // found before the excess is read), stalls (408) or the client goes (-1).
  Framing read_chunked(size_t at, size_t max_body, const std::atomic<bool>& stopping, std::string& body,
                       size_t& end) {
    ChunkedDecoder decoder(max_body);
    while (true) {
      switch (decoder.resume(std::string_view(buf_).substr(pos_ + at))) {
        case ChunkedDecoder::Status::kDone:
          body = decoder.take_body();
          end = at + decoder.end();
          return {};
        case ChunkedDecoder::Status::kBad: return {400, decoder.problem()};
        case ChunkedDecoder::Status::kTooLarge: return {413, decoder.problem()};
        case ChunkedDecoder::Status::kNeedMore: break;
      }
      auto stall = Clock::now() + std::chrono::milliseconds(read_ms_);  // each arrival resets it
      if (int why = more(stall, stopping)) return gave_up(why, "chunked request body");
    }
  }

  // Reads what the socket has (waiting up to timeout_ms); false on timeout, error or EOF.
  bool fill(int timeout_ms) {
    if (eof_) return false;
    if (pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    } else if (pos_ > 64 * 1024) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    if (poll_fd(fd_, POLLIN, timeout_ms) <= 0) return false;
    char tmp[16 * 1024];
    ssize_t n;
    do n = ::recv(fd_, tmp, sizeof tmp, 0);
    while (n < 0 && errno == EINTR);
    if (n == 0) eof_ = true;
    if (n <= 0) return false;
    buf_.append(tmp, size_t(n));
    return true;
  }

  int fd_;
  int read_ms_, write_ms_;
  std::string buf_;             // bytes received and not yet read by httplib: buf_[pos_..]
  size_t pos_ = 0;
  size_t consumed_ = 0;         // bytes httplib has read on this connection
  size_t request_start_ = 0;    // consumed_ when the current request began
  bool eof_ = false;            // the client shut down its sending side
  bool response_started_ = false;  // some of the current response has been sent
  bool probed_ = false;         // the 102 probe was sent for the current request
};

// The connection this thread is serving (handlers run on the connection's thread).
thread_local Connection* current_connection = nullptr;

}  // namespace

void HttplibServer::stop_accepting() {
  stopping_ = true;
  auto sock = svr_sock_.load();
  if (sock != INVALID_SOCKET) ::shutdown(sock, SHUT_RDWR);
}

bool HttplibServer::process_and_close_socket(socket_t sock) {
  int one = 1;
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  Connection conn(sock, double(read_timeout_sec_) + read_timeout_usec_ / 1e6,
                  double(write_timeout_sec_) + write_timeout_usec_ / 1e6);
  current_connection = &conn;
  bool ok = true;
  size_t served = 0;
  while (conn.next_request(double(keep_alive_timeout_sec_), stopping_)) {
    Framing f = conn.frame(stopping_, payload_max_length_);
    if (f.status < 0) break;  // the client went away mid-request, or the server is stopping
    if (f.status > 0) {
      conn.refuse(f.status, f.problem);
      break;
    }
    bool close = stopping_ || ++served >= keep_alive_max_count_;
    bool closed = false;
    ok = process_request(conn, close, closed, nullptr);
    if (!ok || closed || close || !conn.body_consumed(f)) break;
  }
  current_connection = nullptr;
  conn.close_gracefully();
  return ok;
}

bool client_disconnected() { return current_connection && current_connection->gone(); }

}  // namespace nextn::server
