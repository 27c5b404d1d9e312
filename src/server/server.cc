// server/server.cc — routes, auth, CORS, the server lifecycle, and the generation
// handler: request → job (generation_job.cc) → Generation → the whole answer
// (responses.cc) or the streamed one (sse_writer.cc).
#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/generation_job.h"
#include "server/http_connection.h"
#include "server/json_fields.h"
#include "server/output_parser.h"
#include "server/responses.h"
#include "server/sse_writer.h"
#include "server/webui.h"
#include "speculative/counters.h"
#include "util/log.h"
#include "util/process_memory.h"
#include "util/timer.h"

namespace nextn::server {

using json = nlohmann::ordered_json;

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";

// A stream that ended early waits at most 600 × 50 ms = 30 s for its generation to end.
constexpr int kReleaseWaitPolls = 600;
constexpr double kReleaseWaitPollSeconds = 0.05;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), kJson);
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The per-request log line at debug level (the engine logs its own "slot done" line at
// info level): what the server adds is the process's memory.
void log_request_done(uint64_t id, const ResponsePlan& plan, const GenerationUpdate& u) {
  const Timings& t = u.timings;
  ProcessMemory mem = process_memory();
  std::string line = fmt::format("srv  slot done: id {} | gen_tokens={} | prompt={}t cached={}t | {:.1f} t/s | rss={:.2f}GB peak_rss={:.2f}GB",
                                 id, u.completion_tokens, plan.n_prompt, t.cache_n,
                                 t.predicted_ms > 0 ? t.predicted_n * 1000.0 / t.predicted_ms : 0.0, mem.rss / 1e9,
                                 mem.peak_rss / 1e9);
  if (t.speculative.draft_tokens > 0)
    line += " | accepted=" + format_acceptance(t.speculative.accepted, t.speculative.draft_tokens);
  log_debug("{}", line);
}

// Without a vision encoder a request with images is a 400 naming the checkpoint, after
// its images were decoded (so a broken image still gets its own, more useful error).
void require_vision_encoder(const Backend& backend, const ParsedRequest& request) {
  if (request.images.empty() || backend.info().vision) return;
  const ImageInput& first = request.images.front();
  const std::string param = fmt::format("messages[{}].content[{}]", first.message, first.part);
  throw ApiError(400, "invalid_request_error",
                 fmt::format("{}: model '{}' has no vision encoder (checkpoint {}): it cannot take image input",
                             param, backend.info().id, backend.info().path),
                 param, "no_vision_encoder");
}

}  // namespace

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)), http_(new HttplibServer()) {
  start_time_ = now_seconds();
  install_routes();
}

HttpServer::~HttpServer() {
  if (grace_thread_.joinable()) grace_thread_.join();
}

// Every cpp-httplib setting the server uses, in one place.
void HttpServer::configure_http() {
  int threads = options_.http_threads > 0 ? options_.http_threads : 64;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_tcp_nodelay(true);
  http_->set_read_timeout(30, 0);
  http_->set_write_timeout(30, 0);
  http_->set_keep_alive_timeout(5);
  http_->set_keep_alive_max_count(1000);
}

int HttpServer::bind() {
  configure_http();
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) fail(ErrorKind::kResource, "cannot bind {} on a free port", options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    fail(ErrorKind::kResource, "cannot bind {}:{} (in use, or not a local address?)", options_.host, port);
  }
  options_.port = port;
  return port;
}

void HttpServer::run() { http_->listen_after_bind(); }

void HttpServer::set_backend(std::unique_ptr<Backend> backend) {
  backend_ = std::move(backend);
  options_.defaults.kv = backend_->info().kv;
  backend_ready_ = true;
}

void HttpServer::drain() { draining_ = true; }

void HttpServer::stop() {
  draining_ = true;
  if (stopping_.exchange(true)) return;
  // The grace thread exists before the listener stops: run() returns once it has, and the
  // caller may then destroy this server, which joins grace_thread_. Started after, it
  // could be assigned after that join check (std::terminate on a joinable thread).
  grace_thread_ = std::thread([this] {
    Stopwatch sw;
    while (sw.seconds() < options_.shutdown_grace_s) {
      {
        std::lock_guard<std::mutex> lock(active_mu_);
        if (active_.empty()) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::set<std::shared_ptr<Generation>> left;
    {
      std::lock_guard<std::mutex> lock(active_mu_);
      left = active_;
    }
    if (!left.empty()) log_info("shutdown: cancelling {} in-flight generation(s)", left.size());
    for (auto& g : left) g->cancel();
  });
  static_cast<HttplibServer*>(http_.get())->stop_accepting();
}

void HttpServer::track(const std::shared_ptr<Generation>& g, bool add) {
  std::lock_guard<std::mutex> lock(active_mu_);
  if (add) active_.insert(g);
  else active_.erase(g);
}

jinja::RenderLimits HttpServer::render_limits() const {
  jinja::RenderLimits limits = options_.template_limits;
  limits.cancel = &stopping_;  // a render in progress must not hold up a shutdown
  return limits;
}

bool HttpServer::authorized(const httplib::Request& req) const {
  if (options_.api_key.empty()) return true;
  std::string auth = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (auth.size() > bearer.size() && strncasecmp(auth.c_str(), bearer.c_str(), bearer.size()) == 0 &&
      constant_time_equal(auth.substr(bearer.size()), options_.api_key))
    return true;
  std::string key = req.get_header_value("X-Api-Key");
  return !key.empty() && constant_time_equal(key, options_.api_key);
}

void HttpServer::install_routes() {
  httplib::Server& s = *http_;

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    counters_.http_requests++;
    if (!options_.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", options_.cors_origin);
      res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
        res.set_header("Access-Control-Max-Age", "86400");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // The page is public (it asks for the key itself); what it calls is not.
    bool page = options_.webui && find_web_file(req.path) != nullptr;
    bool open = req.path == "/health" || req.path == "/v1/health" || req.path == "/metrics" || page;
    if (!open && !authorized(req)) {
      counters_.http_errors++;
      send_json(res, 401, unauthorized().to_json());
      res.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    counters_.http_errors++;
    ApiError e = internal_error("HTTP error");
    if (res.status == 404) e = not_found("Unknown route: " + req.method + " " + req.path, "unknown_route");
    else if (res.status == 413) e = payload_too_large(options_.max_body_bytes);
    else if (res.status == 405) e = ApiError(405, "invalid_request_error", "Method not allowed: " + req.method);
    else if (res.status == 400) e = bad_request("Malformed HTTP request");
    else if (res.status >= 400 && res.status < 500) e = ApiError(res.status, "invalid_request_error", "HTTP error");
    int status = res.status;
    send_json(res, status, e.to_json());
    return httplib::Server::HandlerResponse::Handled;
  }));

  s.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    counters_.http_errors++;
    std::string msg = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    log_error("server: unhandled exception: {}", msg);
    send_json(res, 500, internal_error(msg).to_json());
  });

  // Every handler body runs inside this guard: ApiError → its status, nextn::Error
  // → 4xx, anything else → 500, never a crash.
  auto guarded = [this](auto fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const ApiError& e) {
        counters_.http_errors++;
        send_json(res, e.status, e.to_json());
      } catch (const Error& e) {
        counters_.http_errors++;
        ApiError a = from_error(e);
        send_json(res, a.status, a.to_json());
      } catch (const json::exception& e) {
        counters_.http_errors++;
        send_json(res, 400, bad_request(std::string("invalid request: ") + e.what()).to_json());
      } catch (const std::bad_alloc&) {
        counters_.http_errors++;
        send_json(res, 503, unavailable("out of memory").to_json());
      } catch (const std::exception& e) {
        counters_.http_errors++;
        log_error("server: {} {}: {}", req.method, req.path, e.what());
        send_json(res, 500, internal_error(e.what()).to_json());
      }
    };
  };

  auto health = guarded([this](const httplib::Request&, httplib::Response& res) { handle_health(res); });
  s.Get("/health", health);
  s.Get("/v1/health", health);
  s.Get("/metrics", guarded([this](const httplib::Request&, httplib::Response& res) { handle_metrics(res); }));
  auto models = guarded([this](const httplib::Request&, httplib::Response& res) { handle_models(res); });
  s.Get("/v1/models", models);
  s.Get("/models", models);
  auto chat = guarded([this](const httplib::Request& q, httplib::Response& r) { handle_generation(q, r, true); });
  s.Post("/v1/chat/completions", chat);
  s.Post("/chat/completions", chat);
  auto completions = guarded([this](const httplib::Request& q, httplib::Response& r) { handle_generation(q, r, false); });
  s.Post("/v1/completions", completions);
  s.Post("/completions", completions);
  s.Post("/tokenize", guarded([this](const httplib::Request& q, httplib::Response& r) { handle_tokenize(q, r); }));
  s.Post("/detokenize", guarded([this](const httplib::Request& q, httplib::Response& r) { handle_detokenize(q, r); }));
  if (options_.webui) {
    auto page = guarded([this](const httplib::Request& q, httplib::Response& r) { handle_web_file(q, r); });
    s.Get("/", page);
    s.Get(R"(/webui/[A-Za-z0-9._-]+)", page);
  }
  s.Post("/apply-template",
         guarded([this](const httplib::Request& q, httplib::Response& r) { handle_apply_template(q, r); }));
}

void HttpServer::handle_web_file(const httplib::Request& req, httplib::Response& res) {
  const WebFile* file = find_web_file(req.path);
  if (!file) throw not_found("Unknown route: GET " + req.path, "unknown_route");
  // Everything the page loads comes from this server; nothing inline, no other origin.
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
                 "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-cache");
  res.set_content(std::string(file->body), std::string(file->content_type));
}

MetricsInput HttpServer::metrics_input() const {
  MetricsInput in;
  Backend* b = backend();
  if (b) {
    in.info = &b->info();
    in.engine = b->stats();
  }
  in.counters = &counters_;
  in.memory = process_memory();
  in.uptime_s = now_seconds() - start_time_;
  in.draining = draining_ || stopping_;
  return in;
}

void HttpServer::handle_health(httplib::Response& res) {
  if (!backend()) {
    json body = unavailable("Loading model").to_json();
    body["status"] = "loading";
    send_json(res, 503, body);
    return;
  }
  MetricsInput in = metrics_input();
  json body = render_health(in);
  body["api_key_required"] = !options_.api_key.empty();  // the chat page asks for a key before it calls
  // A balancer's health check sees 503 while the replica is full or draining and sends new
  // work elsewhere; the body says which.
  send_json(res, readiness(in) == Readiness::kReady ? 200 : 503, body);
}

void HttpServer::handle_metrics(httplib::Response& res) {
  res.status = 200;
  res.set_content(render_metrics(metrics_input()), "text/plain; version=0.0.4; charset=utf-8");
}

void HttpServer::handle_models(httplib::Response& res) {
  Backend* b = backend();
  if (!b) throw unavailable("Loading model");
  const ModelInfo& m = b->info();
  json entry = {{"id", m.id},
                {"object", "model"},
                {"created", int64_t(start_time_ > 0 ? std::time(nullptr) : 0)},
                {"owned_by", "nextn"},
                {"root", m.path},
                {"max_model_len", m.n_ctx},
                {"meta",
                 {{"architecture", m.architecture},
                  {"n_vocab", m.vocab_size},
                  {"n_ctx", m.n_ctx},
                  {"n_ctx_train", m.n_ctx_train},
                  {"size", m.weight_bytes},
                  {"kv_type", m.kv_type},
                  {"speculative", m.speculative},
                  // Whether image_url parts are taken (the chat page offers attachments only then).
                  {"vision", m.vision != nullptr}}}};
  send_json(res, 200, {{"object", "list"}, {"data", json::array({entry})}});
}

void HttpServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  Backend* b = backend();
  if (!b) throw unavailable("Loading model");
  json body = parse_body(req.body, options_.max_json_depth);
  auto content = opt_string(body, "content");
  if (!content) bad_field("content", "is required (a string)");
  bool add_special = opt_bool(body, "add_special").value_or(false);
  bool parse_special = opt_bool(body, "parse_special").value_or(true);
  bool with_pieces = opt_bool(body, "with_pieces").value_or(false);
  std::vector<int32_t> ids = b->tokenize(*content, add_special, parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces) tokens.push_back({{"id", id}, {"piece", b->token_text(id)}});
    else tokens.push_back(id);
  }
  send_json(res, 200, {{"tokens", tokens}});
}

void HttpServer::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  Backend* b = backend();
  if (!b) throw unavailable("Loading model");
  json body = parse_body(req.body, options_.max_json_depth);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) bad_field("tokens", "is required (an array of token ids)");
  std::vector<int32_t> ids;
  int vocab = b->info().vocab_size;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      bad_field(fmt::format("tokens[{}]", i), fmt::format("expected a token id in [0, {})", vocab));
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  send_json(res, 200, {{"content", b->detokenize(ids)}});
}

// The prompt text a chat request renders to (llama-server's /apply-template).
void HttpServer::handle_apply_template(const httplib::Request& req, httplib::Response& res) {
  Backend* b = backend();
  if (!b) throw unavailable("Loading model");
  json body = parse_body(req.body, options_.max_json_depth);
  ParsedRequest pr = parse_chat_request(body, options_.defaults);
  require_vision_encoder(*b, pr);
  bool add_generation_prompt = opt_bool(body, "add_generation_prompt").value_or(true);
  send_json(res, 200, {{"prompt", render_chat_prompt(*b, pr, add_generation_prompt, render_limits())}});
}

void HttpServer::handle_generation(const httplib::Request& req, httplib::Response& res, bool chat) {
  Backend* b = backend();
  if (!b) throw unavailable("Loading model");
  if (stopping_) throw unavailable("Server is shutting down");
  json body = parse_body(req.body, options_.max_json_depth);
  ParsedRequest parsed =
      chat ? parse_chat_request(body, options_.defaults) : parse_completion_request(body, options_.defaults);
  require_vision_encoder(*b, parsed);
  PreparedGeneration prepared = prepare_generation(*b, std::move(parsed), options_.defaults.max_tokens, render_limits());
  std::shared_ptr<Generation> gen;
  try {
    gen = Generation::start(*b, std::move(prepared.job));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kResource) {
      counters_.rejected_overload++;
      throw unavailable(std::string("Server is busy: ") + e.what());
    }
    throw;
  }
  track(gen, true);
  ResponseIds ids = new_response_ids(chat, b->info().id);
  if (prepared.plan.stream) stream_answer(res, gen, std::move(prepared.plan), std::move(ids));
  else whole_answer(res, gen, prepared.plan, ids);
}

// Bookkeeping once a generation has ended: untrack, count, log.
void HttpServer::generation_ended(const std::shared_ptr<Generation>& gen, const ResponsePlan& plan,
                                  const GenerationUpdate& last) {
  track(gen, false);
  if (last.finish == FinishReason::kError || last.finish == FinishReason::kInvalidRequest)
    counters_.completions_failed++;
  else counters_.completions_ok++;
  counters_.prompt_tokens_cached += uint64_t(std::max(0, last.timings.cache_n));
  if (options_.log_requests && log_level() <= LogLevel::kDebug) log_request_done(gen->id(), plan, last);
}

void HttpServer::whole_answer(httplib::Response& res, const std::shared_ptr<Generation>& gen,
                              const ResponsePlan& plan, const ResponseIds& ids) {
  GenerationUpdate u;
  std::string raw;
  std::vector<TokenEvent> tokens;
  std::vector<std::string> token_texts;
  std::vector<std::vector<std::string>> top_texts;
  bool abandoned = false;
  for (;;) {
    bool got = gen->wait(u, 0.25);
    if (!u.done && !abandoned && client_disconnected()) {  // nobody to answer: free the slot, once
      abandoned = true;
      counters_.cancelled++;
      log_info("srv  client disconnected: id {} | cancelling", gen->id());
      gen->cancel();
    }
    if (!got) continue;
    raw += u.text;
    if (plan.logprobs) {
      tokens.insert(tokens.end(), u.tokens.begin(), u.tokens.end());
      token_texts.insert(token_texts.end(), u.token_texts.begin(), u.token_texts.end());
      top_texts.insert(top_texts.end(), u.top_texts.begin(), u.top_texts.end());
    }
    if (u.done) break;
  }
  generation_ended(gen, plan, u);
  if (u.finish == FinishReason::kError) throw internal_error("generation failed: " + u.error);
  if (u.finish == FinishReason::kInvalidRequest)
    throw ApiError(400, "invalid_request_error", u.error, {}, "grammar_limit");
  json usage = usage_json(plan.n_prompt, u.completion_tokens, u.timings.cache_n);
  json timings = timings_json(u.timings);
  if (plan.chat) {
    OutputParser parser(plan.opens_think, plan.tools);
    json logprobs = plan.logprobs ? chat_logprobs(tokens, token_texts, top_texts) : json(nullptr);
    send_json(res, 200, chat_completion_body(ids, parser, raw, logprobs, u.finish, usage, timings));
  } else {
    json logprobs =
        plan.logprobs ? completion_logprobs(tokens, token_texts, top_texts, plan.echo.size()) : json(nullptr);
    send_json(res, 200, text_completion_body(ids, plan.echo + raw, logprobs, u.finish, usage, timings));
  }
}

void HttpServer::stream_answer(httplib::Response& res, const std::shared_ptr<Generation>& gen, ResponsePlan plan,
                               ResponseIds ids) {
  SseWriter::Hooks hooks;
  hooks.finished = [this, gen, plan](const GenerationUpdate& u) { generation_ended(gen, plan, u); };
  hooks.client_gone = [this, gen] {
    counters_.cancelled++;
    log_info("srv  client disconnected: id {} | cancelling", gen->id());
  };
  auto writer = std::make_shared<SseWriter>(gen, std::move(plan), std::move(ids), std::move(hooks));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.status = 200;
  res.set_chunked_content_provider(
      "text/event-stream", [writer](size_t, httplib::DataSink& sink) { return writer->write_next(sink); },
      [this, writer, gen](bool) {
        if (writer->finished()) return;
        gen->cancel();
        // Wait for the engine to let go so the slot is free when we return: it ends a
        // cancelled sequence within one step, so this is a bound, not a delay.
        GenerationUpdate u;
        for (int i = 0; i < kReleaseWaitPolls && !u.done; ++i) gen->wait(u, kReleaseWaitPollSeconds);
        track(gen, false);
      });
}

}  // namespace nextn::server
