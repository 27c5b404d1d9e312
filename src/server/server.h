// server/server.h — the OpenAI-compatible HTTP server (cpp-httplib).
// Routes: /v1/chat/completions, /v1/completions (streamed and not), /v1/models,
// /health, /metrics, /tokenize, /detokenize, /apply-template, CORS preflight, and the
// built-in chat page at / (server/webui.h). It listens before the
// model is loaded (503 until set_backend), checks the API key, limits body size
// and JSON depth, and shuts down gracefully: stop accepting, let in-flight
// streams end (cancelled after a grace period), then return from run(). /health says
// ready (200), full or draining (503) for load balancers (server/metrics.h).
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "server/backend.h"
#include "server/metrics.h"
#include "server/request.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace nextn::server {

class Generation;
struct GenerationUpdate;
struct ResponsePlan;
struct ResponseIds;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 5413;               // 0: any free port
  std::string api_key;           // empty: no auth
  std::string cors_origin;       // empty: no CORS headers
  RequestDefaults defaults;      // sampling defaults, --max-tokens
  size_t max_body_bytes = 16u << 20;
  int max_json_depth = 64;
  int http_threads = 0;          // 0: derived from parallel + queue
  double shutdown_grace_s = 10;  // in-flight generations get this long before being cancelled
  double drain_delay_s = 0;      // after SIGTERM, /health says draining this long before the listener closes
  jinja::RenderLimits template_limits;  // bounds on each chat-template render (cancel is set by the server)
  bool log_requests = true;
  bool webui = true;             // serve the chat page at / (--no-webui: off)
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();

  // Binds the socket (throws nextn::Error when it cannot); returns the port.
  int bind();
  // Serves until stop(); blocks. Call after bind().
  void run();
  // The model is loaded: requests are served from now on.
  void set_backend(std::unique_ptr<Backend> backend);
  Backend* backend() const { return backend_ready_ ? backend_.get() : nullptr; }
  // Announce a coming stop (thread-safe): /health answers 503 "draining" so balancers
  // take this replica out, while requests are still accepted and served.
  void drain();
  // Graceful stop (thread-safe, idempotent): refuse new requests, close the
  // listening socket, cancel generations still running after the grace period.
  void stop();
  const ServerOptions& options() const { return options_; }

 private:
  void configure_http();
  void install_routes();
  bool authorized(const httplib::Request& req) const;
  // The configured template limits, cancelled when the server stops.
  jinja::RenderLimits render_limits() const;
  void handle_generation(const httplib::Request& req, httplib::Response& res, bool chat);
  void whole_answer(httplib::Response& res, const std::shared_ptr<Generation>& gen, const ResponsePlan& plan,
                    const ResponseIds& ids);
  void stream_answer(httplib::Response& res, const std::shared_ptr<Generation>& gen, ResponsePlan plan,
                     ResponseIds ids);
  void generation_ended(const std::shared_ptr<Generation>& gen, const ResponsePlan& plan,
                        const GenerationUpdate& last);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  void handle_apply_template(const httplib::Request& req, httplib::Response& res);
  void handle_models(httplib::Response& res);
  void handle_health(httplib::Response& res);
  void handle_metrics(httplib::Response& res);
  void handle_web_file(const httplib::Request& req, httplib::Response& res);
  MetricsInput metrics_input() const;
  void track(const std::shared_ptr<Generation>& g, bool add);

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<Backend> backend_;
  std::atomic<bool> backend_ready_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};
  ServerCounters counters_;
  double start_time_ = 0;

  std::mutex active_mu_;
  std::set<std::shared_ptr<Generation>> active_;
  std::thread grace_thread_;
};

}  // namespace nextn::server
