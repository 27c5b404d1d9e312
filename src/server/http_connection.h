// server/http_connection.h — how nextn serves one TCP connection under cpp-httplib.
// httplib 0.11 (Debian 12) routes and writes responses well but frames requests
// loosely; this layer owns the connection loop instead and adds:
//   - one read buffer for the whole connection, so pipelined requests are all answered
//     (httplib drops whatever it read past the first request);
//   - strict framing before httplib parses anything: one Content-Length, never together
//     with Transfer-Encoding, chunked as the only transfer coding, no header folding or
//     space before the colon (each a way to smuggle a request past a proxy) → 400;
//   - a half-closed client (it sent its request, then shut down its sending side) still
//     gets its answer: the end of its input is not taken for a disconnect;
//   - client_disconnected() for handlers that wait on long work, e.g. a non-streamed
//     generation, so a client that has gone frees its slot.
#pragma once
#include <httplib.h>

#include <atomic>
#include <string>

namespace nextn::server {

// httplib::Server that serves each accepted socket with the loop above, and stops
// accepting without cutting in-flight streams short (httplib's stop() ends every
// chunked response at once).
class HttplibServer : public httplib::Server {
 public:
  // Closes the listening socket: the accept loop ends, and listen() returns once the
  // in-flight connections are done; idle keep-alive connections close at once.
  void stop_accepting();

 private:
  bool process_and_close_socket(socket_t sock) override;
  std::atomic<bool> stopping_{false};
};

// True when the client of the request this thread is handling has gone. Cheap (one
// poll): call it between waits. A client that only shut down its sending side is
// still there; telling the two apart takes one write, so before any of the response
// is sent this may send an interim "102 Processing" line, which HTTP/1.1 clients skip.
bool client_disconnected();

}  // namespace nextn::server
