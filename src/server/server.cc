// server/server.cc — routes, auth, CORS, streaming and the server lifecycle.
#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/output_parser.h"
#include "server/responses.h"
#include "util/log.h"
#include "util/timer.h"

namespace nextn::server {

using json = nlohmann::ordered_json;

// httplib::Server with a way to stop accepting without cutting streams short:
// httplib's stop() makes every chunked response end at once, so a graceful stop
// shuts the listening socket down instead; the accept loop then ends and
// listen() returns once the in-flight handlers are done.
class HttplibServer : public httplib::Server {
 public:
  void stop_accepting() {
    auto sock = svr_sock_.load();
    if (sock != INVALID_SOCKET) ::shutdown(sock, SHUT_RDWR);
  }
};

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), kJson);
}

std::string basename_of(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool model_matches(const std::string& m, const ModelInfo& info) {
  return m.empty() || m == info.id || m == info.path || m == basename_of(info.path);
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The prompt opened a <think> block that the model continues (Qwen3.5/DeepSeek-R1 templates).
bool prompt_opens_think(const std::string& rendered) {
  size_t e = rendered.size();
  while (e > 0 && (rendered[e - 1] == '\n' || rendered[e - 1] == ' ' || rendered[e - 1] == '\r')) --e;
  return e >= 7 && rendered.compare(e - 7, 7, "<think>") == 0;
}

bool write_all(httplib::DataSink& sink, const std::string& text) {
  // Two writes: a write to a connection whose peer has gone fails on the
  // second send, so a disconnect is noticed within the same step.
  if (text.size() > 2) {
    return sink.write(text.data(), text.size() - 2) && sink.write(text.data() + text.size() - 2, 2);
  }
  return sink.write(text.data(), text.size());
}

std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

double per_second(int n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; }

// Everything a generation handler needs after the prompt is built.
struct GenContext {
  std::shared_ptr<Generation> gen;
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
  int n_prompt = 0;
  std::string echo;  // completions echo text
  ResponseIds ids;
  std::unique_ptr<OutputParser> parser;
  // Accumulated (non-stream) or bookkeeping (stream).
  std::string text, reasoning;
  std::vector<TokenEvent> tokens;
  std::vector<std::string> token_texts;
  std::vector<std::vector<std::string>> top_texts;
  size_t text_offset = 0;
  bool sent_role = false;
  bool finished = false;
  int completion_tokens = 0;
};

}  // namespace

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)), http_(new HttplibServer()) {
  start_time_ = now_seconds();
  install_routes();
}

HttpServer::~HttpServer() {
  if (grace_thread_.joinable()) grace_thread_.join();
}

int HttpServer::bind() {
  int threads = options_.http_threads > 0 ? options_.http_threads : 64;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_tcp_nodelay(true);
  http_->set_read_timeout(30, 0);
  http_->set_write_timeout(30, 0);
  http_->set_keep_alive_timeout(5);
  http_->set_keep_alive_max_count(1000);
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

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  static_cast<HttplibServer*>(http_.get())->stop_accepting();
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
    bool open = req.path == "/health" || req.path == "/v1/health" || req.path == "/metrics";
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
  s.Post("/apply-template",
         guarded([this](const httplib::Request& q, httplib::Response& r) { handle_apply_template(q, r); }));
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
  return in;
}

void HttpServer::handle_health(httplib::Response& res) {
  if (!backend()) {
    json body = unavailable("Loading model").to_json();
    body["status"] = "loading";
    send_json(res, 503, body);
    return;
  }
  json body = render_health(metrics_input());
  if (stopping_) {
    body["status"] = "shutting_down";
    send_json(res, 503, body);
    return;
  }
  send_json(res, 200, body);
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
                  {"speculative", m.speculative}}}};
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
  bool add_generation_prompt = opt_bool(body, "add_generation_prompt").value_or(true);
  std::string prompt;
  try {
    prompt = b->apply_chat_template(pr.messages, pr.tools, add_generation_prompt, pr.template_kwargs, render_limits());
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error", std::string("chat template: ") + e.what(), "messages",
                   "template_error");
  }
  send_json(res, 200, {{"prompt", prompt}});
}

void HttpServer::handle_generation(const httplib::Request& req, httplib::Response& res, bool chat) {
  Backend* b = backend();
  if (!b) throw unavailable("Loading model");
  if (stopping_) throw unavailable("Server is shutting down");
  const ModelInfo& info = b->info();
  json body = parse_body(req.body, options_.max_json_depth);
  ParsedRequest pr = chat ? parse_chat_request(body, options_.defaults) : parse_completion_request(body, options_.defaults);
  if (!model_matches(pr.model, info)) {
    ApiError e = not_found("The model '" + pr.model + "' does not exist (this server serves '" + info.id + "')",
                           "model_not_found");
    e.param = "model";
    throw e;
  }

  // Group-quantized KV: the group must divide head_dim (the default shrinks to fit).
  if (pr.kv && info.head_dim > 0 && info.head_dim % pr.kv->group_size != 0) {
    if (body.contains("kv_group_size") && !body["kv_group_size"].is_null())
      bad_field("kv_group_size", fmt::format("must divide the model's head_dim ({})", info.head_dim));
    while (pr.kv->group_size > 1 && info.head_dim % pr.kv->group_size != 0) pr.kv->group_size /= 2;
  }

  // The prompt.
  auto ctx = std::make_shared<GenContext>();
  std::vector<int32_t> prompt;
  bool opens_think = false;
  if (chat) {
    std::string rendered;
    try {
      rendered = b->apply_chat_template(pr.messages, pr.tools, true, pr.template_kwargs, render_limits());
    } catch (const Error& e) {
      throw ApiError(400, "invalid_request_error", std::string("chat template: ") + e.what(), "messages",
                     "template_error");
    }
    prompt = b->tokenize(rendered, false, true);
    opens_think = prompt_opens_think(rendered);
  } else if (pr.prompt_is_tokens) {
    for (size_t i = 0; i < pr.prompt_tokens.size(); ++i)
      if (pr.prompt_tokens[i] >= info.vocab_size)
        bad_field(fmt::format("prompt[{}]", i), fmt::format("token id {} is outside the vocabulary ({})",
                                                             pr.prompt_tokens[i], info.vocab_size));
    prompt = pr.prompt_tokens;
    if (pr.echo) ctx->echo = b->detokenize(prompt);
  } else {
    prompt = b->tokenize(pr.prompt_text, true, true);
    if (pr.echo) ctx->echo = pr.prompt_text;
  }
  if (prompt.empty()) bad_field(chat ? "messages" : "prompt", "the prompt is empty");
  if (int(prompt.size()) >= info.n_ctx) throw context_exceeded(int(prompt.size()), info.n_ctx);

  int max_tokens = pr.max_tokens.value_or(options_.defaults.max_tokens);
  max_tokens = std::min<int64_t>(max_tokens, int64_t(info.n_ctx) - int64_t(prompt.size()));

  GenerationSpec spec;
  spec.request.prompt = prompt;
  spec.request.max_tokens = max_tokens;
  spec.request.sampling = pr.sampling;
  spec.request.logprobs = pr.logprobs;
  spec.request.top_logprobs = pr.top_logprobs;
  spec.request.speculative = pr.speculative;
  spec.request.num_draft_tokens = pr.num_draft_tokens;
  spec.request.kv = pr.kv;
  spec.stop = pr.stop;
  spec.want_token_texts = pr.logprobs;
  spec.ignore_eos = pr.ignore_eos;

  ctx->chat = chat;
  ctx->stream = pr.stream;
  ctx->include_usage = pr.include_usage;
  ctx->logprobs = pr.logprobs;
  ctx->top_logprobs = pr.top_logprobs;
  ctx->n_prompt = int(prompt.size());
  ctx->ids = new_response_ids(chat, info.id);
  ctx->parser = std::make_unique<OutputParser>(opens_think, chat ? pr.tools : json());
  ctx->text_offset = ctx->echo.size();

  try {
    ctx->gen = Generation::start(*b, std::move(spec));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kResource) {
      counters_.rejected_overload++;
      throw unavailable(std::string("Server is busy: ") + e.what());
    }
    throw;
  }
  track(ctx->gen, true);

  // Called with each update: collects logprob texts for this update.
  auto top_texts_of = [b](const std::vector<TokenEvent>& toks) {
    std::vector<std::vector<std::string>> out;
    for (const auto& t : toks) {
      std::vector<std::string> alt;
      for (const auto& a : t.top) alt.push_back(b->token_text(a.token));
      out.push_back(std::move(alt));
    }
    return out;
  };

  // The engine logs the SwiftLM-style "slot done ... | MTP_ACCEPTED=a/t (x%)" line;
  // this adds the server's view (memory) at debug level.
  auto log_done = [this](const GenContext& c, const GenerationUpdate& u) {
    if (!options_.log_requests || log_level() > LogLevel::kDebug) return;
    ProcessMemory mem = process_memory();
    std::string line = fmt::format("srv  slot done: id {} | gen_tokens={} | prompt={}t cached={}t | {:.1f} t/s | OS_RAM={:.1f}GB | MEM_DEMAND={:.1f}GB | GPU_MEM=0.0GB",
                                   c.gen->id(), u.completion_tokens, c.n_prompt, u.timings.cache_n,
                                   per_second(u.timings.predicted_n, u.timings.predicted_ms), mem.rss / 1e9,
                                   mem.rss / 1e9);
    if (u.timings.draft_n > 0)
      line += fmt::format(" | MTP_ACCEPTED={}/{} ({:.1f}%)", u.timings.draft_n_accepted, u.timings.draft_n,
                          100.0 * u.timings.draft_n_accepted / u.timings.draft_n);
    log_debug("{}", line);
  };

  auto account = [this](const GenerationUpdate& u) {
    if (u.finish == FinishReason::kError) counters_.completions_failed++;
    else counters_.completions_ok++;
    counters_.prompt_tokens_cached += uint64_t(std::max(0, u.timings.cache_n));
  };

  if (!ctx->stream) {
    GenerationUpdate u;
    std::string raw;
    for (;;) {
      if (!ctx->gen->wait(u, 1.0)) continue;
      raw += u.text;
      if (ctx->logprobs) {
        auto tops = top_texts_of(u.tokens);
        ctx->tokens.insert(ctx->tokens.end(), u.tokens.begin(), u.tokens.end());
        ctx->token_texts.insert(ctx->token_texts.end(), u.token_texts.begin(), u.token_texts.end());
        ctx->top_texts.insert(ctx->top_texts.end(), tops.begin(), tops.end());
      }
      if (u.done) break;
    }
    track(ctx->gen, false);
    account(u);
    log_done(*ctx, u);
    if (u.finish == FinishReason::kError) throw internal_error("generation failed: " + u.error);
    json usage = usage_json(ctx->n_prompt, u.completion_tokens, u.timings.cache_n);
    json timings = timings_json(u.timings);
    // The non-streamed response object of either endpoint around its one choice.
    auto completion_body = [&](const char* object, const json& choice) {
      return json{{"id", ctx->ids.id},
                  {"object", object},
                  {"created", ctx->ids.created},
                  {"model", ctx->ids.model},
                  {"system_fingerprint", "nextn-" NEXTN_VERSION},
                  {"choices", json::array({choice})},
                  {"usage", usage},
                  {"timings", timings}};
    };
    if (chat) {
      OutputDelta d1 = ctx->parser->feed(raw);
      OutputDelta d2 = ctx->parser->finish();
      std::string content = d1.content + d2.content;
      std::string reasoning = d1.reasoning + d2.reasoning;
      const auto& calls = ctx->parser->tool_calls();
      json message = {{"role", "assistant"}};
      bool blank = content.find_first_not_of(" \n\r\t") == std::string::npos;
      message["content"] = (!calls.empty() && blank) ? json(nullptr) : json(content);
      if (!reasoning.empty()) message["reasoning_content"] = reasoning;
      if (!calls.empty()) message["tool_calls"] = tool_calls_json(calls, false);
      json choice = {{"index", 0},
                     {"message", message},
                     {"logprobs", ctx->logprobs ? chat_logprobs(ctx->tokens, ctx->token_texts, ctx->top_texts) : json(nullptr)},
                     {"finish_reason", finish_reason_text(u.finish, !calls.empty())}};
      send_json(res, 200, completion_body("chat.completion", choice));
    } else {
      json choice = {{"index", 0},
                     {"text", ctx->echo + raw},
                     {"logprobs", ctx->logprobs ? completion_logprobs(ctx->tokens, ctx->token_texts, ctx->top_texts, ctx->text_offset)
                                                : json(nullptr)},
                     {"finish_reason", finish_reason_text(u.finish, false)}};
      send_json(res, 200, completion_body("text_completion", choice));
    }
    return;
  }

  // Streaming: one provider call per update.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto provider = [this, ctx, top_texts_of, log_done, account](size_t, httplib::DataSink& sink) -> bool {
    GenContext& c = *ctx;
    auto chunk_with_usage = [&](json chunk) {
      if (c.include_usage) chunk["usage"] = nullptr;
      return chunk;
    };
    auto fail_write = [&] {
      if (!c.finished) {
        counters_.cancelled++;
        log_info("srv  client disconnected: id {} | cancelling", c.gen->id());
        c.gen->cancel();
      }
      return false;
    };
    if (c.finished) {
      sink.done();
      return true;
    }
    std::string out;
    if (!c.sent_role) {
      c.sent_role = true;
      if (c.chat) out += sse(chunk_with_usage(chat_chunk(c.ids, {{"role", "assistant"}, {"content", ""}}, nullptr)));
      else if (!c.echo.empty()) out += sse(chunk_with_usage(completion_chunk(c.ids, c.echo, nullptr)));
      if (!out.empty() && !write_all(sink, out)) return fail_write();
      out.clear();
    }
    GenerationUpdate u;
    if (!c.gen->wait(u, 5.0)) {
      // Idle (queued or slow step): a comment keeps proxies open and detects gone clients.
      if (!write_all(sink, ": keep-alive\n\n")) return fail_write();
      return true;
    }
    c.completion_tokens = u.completion_tokens;
    json lp = nullptr;
    if (c.logprobs && !u.tokens.empty()) {
      auto tops = top_texts_of(u.tokens);
      lp = c.chat ? chat_logprobs(u.tokens, u.token_texts, tops)
                  : completion_logprobs(u.tokens, u.token_texts, tops, c.text_offset);
    }
    if (c.chat) {
      OutputDelta d = c.parser->feed(u.text);
      if (u.done) {
        OutputDelta f = c.parser->finish();
        d.content += f.content;
        d.reasoning += f.reasoning;
      }
      if (!d.empty() || !lp.is_null()) {
        json delta = json::object();
        if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
        if (!d.content.empty()) delta["content"] = d.content;
        json chunk = chat_chunk(c.ids, delta, nullptr);
        chunk["choices"][0]["logprobs"] = lp;
        out += sse(chunk_with_usage(chunk));
      }
    } else if (!u.text.empty() || !lp.is_null()) {
      json chunk = completion_chunk(c.ids, u.text, nullptr);
      chunk["choices"][0]["logprobs"] = lp;
      out += sse(chunk_with_usage(chunk));
      c.text_offset += u.text.size();
    }
    if (u.done) {
      c.finished = true;
      track(c.gen, false);
      account(u);
      log_done(c, u);
      if (u.finish == FinishReason::kError) {
        out += sse(internal_error("generation failed: " + u.error).to_json());
      } else {
        bool calls = c.chat && !c.parser->tool_calls().empty();
        if (calls) out += sse(chunk_with_usage(chat_chunk(c.ids, {{"tool_calls", tool_calls_json(c.parser->tool_calls(), true)}}, nullptr)));
        const char* reason = finish_reason_text(u.finish, calls);
        json last = c.chat ? chat_chunk(c.ids, json::object(), reason) : completion_chunk(c.ids, "", reason);
        last["timings"] = timings_json(u.timings);
        out += sse(chunk_with_usage(last));
        if (c.include_usage) {
          json usage_chunk = {{"id", c.ids.id},
                              {"object", c.chat ? "chat.completion.chunk" : "text_completion"},
                              {"created", c.ids.created},
                              {"model", c.ids.model},
                              {"system_fingerprint", "nextn-" NEXTN_VERSION},
                              {"choices", json::array()},
                              {"usage", usage_json(c.n_prompt, u.completion_tokens, u.timings.cache_n)},
                              {"timings", timings_json(u.timings)}};
          out += sse(usage_chunk);
        }
      }
      out += "data: [DONE]\n\n";
      if (!write_all(sink, out)) return false;
      sink.done();
      return true;
    }
    if (!out.empty() && !write_all(sink, out)) return fail_write();
    return true;
  };
  auto releaser = [this, ctx](bool) {
    if (!ctx->finished) {
      ctx->gen->cancel();
      // Wait for the engine to let go so the slot is free when we return.
      GenerationUpdate u;
      for (int i = 0; i < 600 && !u.done; ++i) ctx->gen->wait(u, 0.05);
      track(ctx->gen, false);
    }
  };
  res.status = 200;
  res.set_chunked_content_provider("text/event-stream", provider, releaser);
}

}  // namespace nextn::server
