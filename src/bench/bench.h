// bench/bench.h — `nextn bench`: the end-to-end benchmark of served configurations.
// Per configuration it boots the regular `nextn serve` binary (or uses --url),
// waits for /health, warms up, sends one streaming request per prompt kind and
// context length (or C at once: --concurrency, aggregate and per-client tok/s),
// samples the server's RSS from /proc, and reports TTFT,
// generation TPS from real token counts, prefill speed, memory, KV bytes and
// speculative acceptance as a console table, markdown, JSON and an SVG chart.
#pragma once
#include <string>
#include <vector>

namespace nextn::bench {

struct BenchConfig {
  std::string name;                // e.g. "Vanilla + MTP"
  std::string key;                 // e.g. "mtp"
  std::vector<std::string> flags;  // extra `nextn serve` flags
};

struct BenchOptions {
  std::string model_dir;
  std::string url;                  // benchmark an already running server instead
  int server_pid = 0;               // with --url: sample this process's memory
  std::vector<int> contexts = {512, 40000, 100000};
  int max_tokens = 60;
  std::vector<BenchConfig> configs;
  int num_mtp_tokens = 4;
  std::vector<std::string> prompts = {"prose", "code", "apple"};
  double temperature = 0.0;
  int repeat = 1;
  int concurrency = 1;  // clients sending at once (the servers get --parallel C)
  bool ignore_eos = false;  // every answer runs to max_tokens (random-weight models)
  int port = 5430;
  int threads = 0;
  std::vector<std::string> server_flags;  // appended to every configuration
  std::string out_md, out_json, out_svg;
  std::string server_log;  // default: nextn_bench_server.log in the temp directory
  std::string command_line;  // recorded in the reports
  double health_timeout_s = 600;
  double request_timeout_s = 1800;
  bool progress = true;
};

// Expands --configs names (vanilla, mtp, turbo, mtp+turbo, draft, ngram, auto,
// or name=flags...) into configurations. Throws nextn::Error on unknown names.
std::vector<BenchConfig> parse_configs(const std::string& spec, int num_mtp_tokens);

// Runs the whole benchmark; returns the process exit code (0 even when some
// configurations FAIL — they are reported, never dropped).
int run_bench(const BenchOptions& options);

}  // namespace nextn::bench
