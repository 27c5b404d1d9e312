// bench/runner.cc — the benchmark flow (see bench.h): per configuration boot the
// server, wait for health, warm up, measure every prompt × context × repeat, stop
// the server by PID; failures are recorded as FAIL/OOM rows, never dropped.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>

#include "bench/bench.h"
#include "bench/client.h"
#include "bench/prompts.h"
#include "bench/report.h"
#include "bench/server_process.h"
#include "util/error.h"

namespace nextn::bench {
namespace {

std::string self_binary() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fail(ErrorKind::kInternal, "cannot resolve /proc/self/exe");
  return std::string(buf, n);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) fail(ErrorKind::kBadInput, "cannot write {}", path);
  out << text;
}

// A distinct first line per request so that no request reuses another's prompt
// prefix from the server's cache: every TTFT is a cold prefill.
void add_nonce(nlohmann::json& messages, const std::string& nonce) {
  for (auto& m : messages) {
    if (m["role"] != "user") continue;
    nlohmann::json& content = m["content"];
    if (content.is_string()) {
      content = "[" + nonce + "]\n" + content.get<std::string>();
      return;
    }
    for (auto& part : content)  // content parts: the first text part (before any picture)
      if (part.value("type", "") == "text") {
        part["text"] = "[" + nonce + "]\n" + part["text"].get<std::string>();
        return;
      }
  }
}

std::string banner(const std::string& title) {
  std::string line(62, '=');
  return line + "\n  Config: " + title + "\n" + line + "\n";
}

}  // namespace

int run_bench(const BenchOptions& o) {
  Report report;
  report.model = o.url.empty() ? o.model_dir : o.url;
  report.machine = describe_machine(o.threads);
  report.command = o.command_line;
  const std::string binary = self_binary();
  int max_context = 0;
  for (int c : o.contexts) max_context = std::max(max_context, c);
  // An image kind's prompt is its picture's tokens whatever the context: at most one per
  // 16×16 pixels in every family nextn runs (Qwen3.5 merges 32×32, Gemma 4 pools 48×48).
  for (const std::string& prompt : o.prompts)
    if (const auto size = image_kind_size(prompt))
      max_context = std::max(max_context, size->first * size->second / 256 + 64);
  // Room for prompts that tokenize longer than their nominal context ("apple "
  // is a fixed word count); the KV cache grows on demand, so this costs nothing.
  const int ctx_size = 2 * max_context + o.max_tokens + 256;

  std::vector<BenchConfig> configs = o.configs;
  if (!o.url.empty()) configs = {{"Server at " + o.url, "url", {}}};
  int request_counter = 0;

  for (const auto& config : configs) {
    std::fprintf(stderr, "\n%s", banner(config.name).c_str());
    std::unique_ptr<ServerProcess> server;
    std::string base_url = o.url;
    pid_t pid = o.server_pid;
    bool healthy = true;
    if (o.url.empty()) {
      std::vector<std::string> args = {"--model", o.model_dir, "--ctx-size", std::to_string(ctx_size),
                                       "--max-tokens", std::to_string(std::max(o.max_tokens, 64))};
      if (o.threads > 0) args.insert(args.end(), {"--threads", std::to_string(o.threads)});
      if (o.concurrency > 1) args.insert(args.end(), {"--parallel", std::to_string(o.concurrency)});
      args.insert(args.end(), o.server_flags.begin(), o.server_flags.end());
      args.insert(args.end(), config.flags.begin(), config.flags.end());
      server = std::make_unique<ServerProcess>(binary, o.port, args, o.server_log);
      base_url = "http://127.0.0.1:" + std::to_string(o.port);
      pid = server->pid();
      healthy = server->wait_healthy(o.health_timeout_s, o.progress);
      if (!healthy) std::fprintf(stderr, "  server log (%s):\n%s", o.server_log.c_str(), server->log_tail(8).c_str());
    }
    Client client(base_url);
    if (healthy) {
      std::fprintf(stderr, "  Warming up... ");
      std::string apples;
      for (int i = 0; i < 200; ++i) apples += "apple ";
      auto warm = client.chat(nlohmann::json::array({{{"role", "user"}, {"content", apples}}}), 20, 0.0, 120);
      report.warmups.push_back({{"config", config.key},
                                {"usage", warm.contains("usage") ? warm["usage"] : nlohmann::json(nullptr)}});
      std::fprintf(stderr, "done\n");
    }
    for (const auto& prompt : o.prompts) {
      for (int context : o.contexts) {
        for (int run = 0; run < o.repeat; ++run) {
          Measurement m;
          m.config_key = config.key;
          m.config_name = config.name;
          m.prompt = prompt;
          m.context = context;
          m.run = run;
          bool server_alive = !server || server->alive();
          if (!healthy || !server_alive) {
            m.status = server && server->killed_by_sigkill() ? "OOM" : "FAIL";
            m.error = server ? "server " + server->exit_description() : "server not healthy";
            report.measurements.push_back(m);
            continue;
          }
          std::fprintf(stderr, "  >> %s context=%d tokens (generating %d tokens)%s...\n", prompt.c_str(), context,
                       o.max_tokens, o.repeat > 1 ? fmt::format(" run {}/{}", run + 1, o.repeat).c_str() : "");
          // One client, or C sending at once, each with its own first line (no shared prefix).
          const int clients = std::max(1, o.concurrency);
          std::vector<nlohmann::json> messages(static_cast<size_t>(clients));
          try {
            for (auto& msg : messages) {
              ++request_counter;
              msg = make_prompt_messages(
                  prompt, context, [&](const std::string& t) { return client.count_tokens(t); },
                  uint32_t(request_counter));
              add_nonce(msg, fmt::format("request {}", request_counter));
            }
          } catch (const Error& e) {
            m.status = "FAIL";
            m.error = e.what();
            report.measurements.push_back(m);
            std::fprintf(stderr, "     FAIL: %s\n", e.what());
            continue;
          }
          std::vector<StreamResult> streams(static_cast<size_t>(clients));
          nlohmann::json fields = prompt_request_fields(prompt);
          if (o.ignore_eos) fields["ignore_eos"] = true;
          double wall_s = 0;
          {
            std::unique_ptr<MemorySampler> sampler;
            if (pid > 0) sampler = std::make_unique<MemorySampler>(pid);
            const auto start = std::chrono::steady_clock::now();
            std::vector<std::thread> senders;
            for (int c = 0; c < clients; ++c)
              senders.emplace_back([&, c] {
                Client own(base_url);  // one connection per client
                streams[size_t(c)] =
                    own.stream_chat(messages[size_t(c)], o.max_tokens, o.temperature, o.request_timeout_s, fields);
              });
            for (auto& t : senders) t.join();
            wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (sampler) {
              MemorySample peak = sampler->peak();
              m.peak_rss_mb = std::max(peak.rss_mb, peak.peak_rss_mb);
              m.rss_mb = sample_memory(pid).rss_mb;
              if (m.rss_mb == 0) m.rss_mb = sampler->last().rss_mb;
            }
          }
          const StreamResult* failed = nullptr;
          for (const auto& r : streams)
            if (!r.ok && !failed) failed = &r;
          if (failed) {
            const StreamResult& r = *failed;
            bool died = server && !server->alive();
            m.status = died && server->killed_by_sigkill() ? "OOM" : "FAIL";
            m.error = died ? "server " + server->exit_description() + "; " + r.error : r.error;
            std::fprintf(stderr, "     %s: %s\n", m.status.c_str(), m.error.c_str());
            report.measurements.push_back(m);
            continue;
          }
          // Each client's figures on a copy of m (which holds the memory samples).
          std::vector<Measurement> parts(size_t(clients), m);
          for (int c = 0; c < clients; ++c) fill_from_stream(parts[size_t(c)], streams[size_t(c)]);
          m = clients > 1 ? merge_clients(parts, wall_s) : parts[0];

          if (m.kv_bytes == 0) {
            if (auto health = client.get_json("/health"); health && health->contains("kv_cache")) {
              const auto& kv = (*health)["kv_cache"];
              // The slot keeps this request's cache (prefix cache) until the next one.
              if (kv.is_object() && kv.contains("bytes_used") && kv["bytes_used"].is_number())
                m.kv_bytes = kv["bytes_used"].get<double>();
              // Hybrid models: attention KV + recurrent state + rollback snapshots.
              if (health->contains("sequence_state")) {
                const auto& st = (*health)["sequence_state"];
                if (st.is_object() && st.contains("total_bytes") && st["total_bytes"].is_number())
                  m.kv_bytes = st["total_bytes"].get<double>();
              }
            }
          }
          std::fprintf(stderr, "     TTFT=%.2fs%s  TPS=%.1f%s  prefill=%.0f tok/s  prompt=%d  tokens=%d  RSS=%.2fGB  "
                               "Peak=%.2fGB%s\n",
                       m.ttft_s, m.image_ms > 0 ? fmt::format(" (image {:.2f}s)", m.image_ms / 1e3).c_str() : "", m.tps,
                       clients > 1 ? fmt::format(" per client, {:.1f} for all {}", m.aggregate_tps, clients).c_str() : "",
                       m.prefill_tps, m.prompt_tokens, m.completion_tokens, m.rss_mb / 1024,
                       m.peak_rss_mb / 1024,
                       m.draft_n > 0 ? fmt::format("  accept={:.1f}% mean-len={:.2f}", 100 * m.accept_rate(),
                                                   m.mean_accepted_length()).c_str()
                                     : "");
          report.measurements.push_back(m);
        }
      }
    }
    if (server) {
      std::fprintf(stderr, "  [Teardown] stopping server pid %d\n", static_cast<int>(server->pid()));
      server->stop();
    }
  }

  report.summaries = summarize(report.measurements);
  std::fputs(format_console_table(report).c_str(), stdout);
  if (!o.out_md.empty()) write_file(o.out_md, format_markdown(report));
  if (!o.out_json.empty()) write_file(o.out_json, format_json(report, o));
  if (!o.out_svg.empty()) write_file(o.out_svg, format_svg(report));
  return 0;
}

}  // namespace nextn::bench
