// cli/serve.cc — `nextn serve`: the OpenAI-compatible HTTP server.
// Binds first (so /health answers 503 while the model loads), loads the engine,
// prints one JSON ready line and a human URL line on stdout, and on SIGTERM/SIGINT
// (after --drain-delay seconds of /health saying "draining") stops accepting, lets
// in-flight streams end and exits 0.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/command.h"
#include "cli/engine_options.h"
#include "cli/flag_checks.h"
#include "cli/template_limits.h"
#include "server/backend.h"
#include "server/server.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timer.h"

namespace nextn {

namespace {

struct ServeFlags {
  EngineFlags engine;
  server::ServerOptions server;
  std::string alias;
  double temp = 0.0, top_p = 1.0, min_p = 0.0, repeat_penalty = 1.0;
  int top_k = 0;
  size_t max_body_mb = 16;
};

std::string model_basename(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A server's requests come and go on many threads, some with bodies of megabytes.
// glibc's defaults suit one-shot programs: each thread may grow its own arena, and the
// mmap threshold rises to the largest block freed so far, after which big request
// buffers come from arenas that rarely shrink. Measured: 22 /tokenize requests of 9 MB
// grew RSS by 820 MB. Fixed thresholds send every block above 256 KiB to mmap (given
// back on free), and four arenas bound what per-thread caching can hold.
void configure_allocator_for_serving() {
  mallopt(M_ARENA_MAX, 4);
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
}

int run_serve(ServeFlags& f) {
  configure_allocator_for_serving();
  check_serve_engine_flags(f.engine);
  EngineOptions eo = resolve_engine_options(f.engine);

  server::ServerOptions so = f.server;
  SamplingParams& s = so.defaults.sampling;
  s.temperature = float(f.temp);
  s.top_p = float(f.top_p);
  s.top_k = f.top_k;
  s.min_p = float(f.min_p);
  s.repetition_penalty = float(f.repeat_penalty);
  so.defaults.kv = eo.kv;
  so.max_body_bytes = f.max_body_mb << 20;
  if (so.http_threads == 0) so.http_threads = std::max(32, eo.parallel + eo.queue_size + 16);
  std::string model_id = f.alias.empty() ? model_basename(eo.model_dir) : f.alias;

  // Signals go to one waiting thread (blocked everywhere else); writes to a
  // closed client must not kill the process.
  signal(SIGPIPE, SIG_IGN);
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  server::HttpServer http(so);
  int port = http.bind();
  std::thread http_thread([&] { http.run(); });
  std::atomic<bool> signalled{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    signalled = true;
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    if (so.drain_delay_s > 0) {
      // Behind a balancer: /health turns 503 "draining" first and requests are still served
      // until the health checks have taken this replica out; a second signal stops at once.
      log_info("received {}: draining for {:.1f}s (/health answers 503), then stopping", name, so.drain_delay_s);
      http.drain();
      timespec wait{time_t(so.drain_delay_s), long((so.drain_delay_s - double(time_t(so.drain_delay_s))) * 1e9)};
      siginfo_t info;
      if (sigtimedwait(&sigs, &info, &wait) > 0) log_info("received a second signal: stopping now");
    }
    log_info("received {}: stopping (no new requests; in-flight streams finish)", name);
    http.stop();
    // The promise to whoever sent the signal (a supervisor, a load balancer draining this
    // replica): once the drain is over, gone within the grace and one second, whatever
    // still holds on.
    std::this_thread::sleep_for(std::chrono::duration<double>(so.shutdown_grace_s + 1.0));
    log_error("still running {:.1f} s after the signal: exiting now", so.shutdown_grace_s + 1.0);
    std::fflush(nullptr);
    _exit(1);
  });
  signal_thread.detach();

  std::string url = fmt::format("http://{}:{}", so.host, port);
  log_info("nextn serve: listening on {} (loading {})", url, eo.model_dir);
  Stopwatch load;
  std::unique_ptr<server::Backend> backend;
  try {
    backend = server::make_engine_backend(eo, model_id);
  } catch (...) {
    http.stop();
    http_thread.join();
    throw;
  }
  const server::ModelInfo info = backend->info();
  http.set_backend(std::move(backend));

  nlohmann::json ready = {{"event", "ready"},
                          {"url", url},
                          {"host", so.host},
                          {"port", port},
                          {"model", info.id},
                          {"model_path", info.path},
                          {"parallel", info.parallel},
                          {"ctx_size", info.n_ctx},
                          {"kv_type", info.kv_type},
                          {"speculative", info.speculative},
                          {"num_draft_tokens", info.num_draft_tokens},
                          {"api_key_required", !so.api_key.empty()},
                          {"webui", so.webui},
                          {"load_seconds", load.seconds()},
                          {"pid", int(getpid())}};
  std::printf("%s\n", ready.dump().c_str());
  std::printf("nextn: serving %s at %s/v1 (OpenAI API; health at %s/health, metrics at %s/metrics)\n",
              info.id.c_str(), url.c_str(), url.c_str(), url.c_str());
  std::fflush(stdout);

  http_thread.join();  // returns after stop() once every in-flight handler is done
  if (server::Backend* b = http.backend()) b->shutdown();
  log_info("nextn serve: stopped");
  return 0;
}

}  // namespace

Command add_serve_command(CLI::App& root) {
  auto flags = std::make_shared<ServeFlags>();
  ServeFlags& f = *flags;
  CLI::App* app = root.add_subcommand("serve", "OpenAI-compatible HTTP server (chat, completions, SSE)");
  add_engine_flags(*app, f.engine);
  app->add_option("--host", f.server.host, "Address to listen on")->capture_default_str();
  app->add_option("--port", f.server.port, "Port to listen on (0: any free port, reported in the ready line)")
      ->capture_default_str()
      ->check(integer_in(0, 65535));
  app->add_option("--api-key", f.server.api_key, "Require 'Authorization: Bearer KEY' (health and metrics stay open)");
  app->add_option("--parallel", f.engine.options.parallel, "Sequences decoded together (slots)")
      ->capture_default_str()
      ->check(integer_in(1, 256));
  app->add_option("--queue-size", f.engine.options.queue_size, "Requests that may wait for a slot; more get 503")
      ->capture_default_str()
      ->check(integer_in(0, 1 << 20));
  app->add_option("-n,--max-tokens", f.server.defaults.max_tokens, "Default max tokens per response")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 24));
  app->add_option("--temp", f.temp, "Default temperature (requests override)")
      ->capture_default_str()
      ->check(finite_in(0, 100));
  app->add_option("--top-p", f.top_p, "Default top-p")->capture_default_str()->check(finite_in(0, 1));
  app->add_option("--top-k", f.top_k, "Default top-k (0: off)")->capture_default_str()->check(integer_in(0, 1 << 30));
  app->add_option("--min-p", f.min_p, "Default min-p")->capture_default_str()->check(finite_in(0, 1));
  app->add_option("--repeat-penalty", f.repeat_penalty, "Default repetition penalty (1: off)")
      ->capture_default_str()
      ->check(finite_in(1e-3, 100));
  app->add_flag("!--no-webui", f.server.webui, "Do not serve the chat page at /");
  app->add_option("--cors", f.server.cors_origin, "Allow browser requests from ORIGIN ('*' for any)");
  app->add_option("--alias", f.alias, "Model name reported by /v1/models (default: the model folder name)");
  app->add_option("--max-body-mb", f.max_body_mb, "Largest request body in MiB (413 beyond)")
      ->capture_default_str()
      ->check(integer_in(1, 4096));
  app->add_option("--shutdown-grace", f.server.shutdown_grace_s,
                  "Seconds in-flight generations may run after SIGTERM before they are cancelled")
      ->capture_default_str()
      ->check(finite_in(0, 86400));
  app->add_option("--drain-delay", f.server.drain_delay_s,
                  "Seconds after SIGTERM during which /health answers 503 \"draining\" while requests are still "
                  "served, so a load balancer's health checks take the replica out before it stops listening")
      ->capture_default_str()
      ->check(finite_in(0, 3600));
  add_template_limit_flags(*app, f.server.template_limits);
  // Structured output is compiled from client input: bound what it may cost.
  grammar::GrammarLimits& g = f.server.defaults.grammar;
  app->add_option("--grammar-max-stacks", g.max_stacks,
                  "Structured output: parse stacks alive at once (how ambiguous a grammar may be)")
      ->capture_default_str()
      ->check(integer_in(16, 1 << 20));
  app->add_option("--grammar-max-elements", g.max_elements,
                  "Structured output: grammar elements once repetitions are written out")
      ->capture_default_str()
      ->check(integer_in(1024, 1 << 26));
  app->add_option("--schema-max-depth", g.schema_max_depth,
                  "Structured output: JSON Schema levels entered at once, each $ref followed counting as one")
      ->capture_default_str()
      ->check(integer_in(4, 1000));  // each level is a few frames of the compiler's recursion
  // Images come from clients too: bound each one and the request's count.
  server::ImageRequestLimits& im = f.server.defaults.images;
  app->add_option("--image-max-bytes", im.image.max_bytes, "Largest image file accepted (bytes, encoded)")
      ->capture_default_str()
      ->check(integer_in(1024, int64_t(1) << 30));
  app->add_option("--max-images", im.max_images, "Images per request")->capture_default_str()->check(integer_in(0, 256));
  app->add_flag("--allow-remote-images", im.remote.enabled,
                "Fetch http(s) image URLs (off: only inline data: URLs). The server then opens connections clients "
                "ask for, to any host it can reach: enable it only where that is wanted");
  app->add_option("--remote-image-timeout", im.remote.timeout_s, "Seconds a remote image fetch may take in all")
      ->capture_default_str()
      ->check(finite_in(0.1, 600));
  return {app, [flags] { return run_serve(*flags); }};
}

}  // namespace nextn
