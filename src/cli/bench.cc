// cli/bench.cc — `nextn bench`: benchmark configurations of `nextn serve` (or any
// OpenAI-compatible server with --url) across prompt kinds and context lengths.
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "bench/bench.h"
#include "cli/command.h"
#include "util/error.h"

namespace nextn {
namespace {

std::vector<int> parse_int_list(const std::string& s, const char* flag) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    try {
      size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (...) {
      fail(ErrorKind::kBadInput, "{}: expected positive integers separated by commas, got '{}'", flag, item);
    }
  }
  if (out.empty()) fail(ErrorKind::kBadInput, "{}: empty list", flag);
  return out;
}

std::vector<std::string> parse_word_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

Command add_bench_command(CLI::App& root) {
  auto* app = root.add_subcommand("bench", "Benchmark nextn serve configurations (successor of mtp_bench.py)");
  struct Flags {
    bench::BenchOptions o;
    std::string contexts = "512,40000,100000", configs = "vanilla,mtp,turbo,mtp+turbo";
    std::string prompts = "prose,code,apple", server_args;
    std::vector<std::string> raw_args;
  };
  auto f = std::make_shared<Flags>();
  app->add_option("-m,--model", f->o.model_dir, "Checkpoint directory (default: the embedded tiny model)");
  app->add_option("--url", f->o.url, "Benchmark an already running OpenAI-compatible server at this URL");
  app->add_option("--server-pid", f->o.server_pid, "With --url: sample this process's memory");
  app->add_option("--contexts", f->contexts, "Context lengths in tokens")->capture_default_str();
  app->add_option("--max-tokens", f->o.max_tokens, "Tokens generated per request")->capture_default_str();
  app->add_option("--configs", f->configs,
                  "Configurations: vanilla, mtp, turbo, mtp+turbo, auto, ngram, draft=--draft-model DIR, "
                  "or name=flags... (custom entries end at ';')")
      ->capture_default_str();
  app->add_option("--num-mtp-tokens", f->o.num_mtp_tokens, "Draft tokens for the mtp configurations")->capture_default_str();
  app->add_option("--prompts", f->prompts, "Prompt kinds: apple, prose, code, chat, json, json-schema (the json request under a JSON Schema), edit, quote, "
                 "agent (answers that repeat what the model read: a file rewritten, a passage quoted, a tool loop), "
                 "image-N / image-WxH (a question about an N×N or W×H picture: time to first token with the vision "
                 "encoder), or a text file")->capture_default_str();
  app->add_option("--temperature", f->o.temperature, "Sampling temperature")->capture_default_str();
  app->add_option("--repeat", f->o.repeat, "Runs per measurement (median, min, max)")->capture_default_str();
  app->add_option("--concurrency", f->o.concurrency,
                  "Clients sending at once per measurement (servers started with --parallel C); reports "
                  "per-client and aggregate tok/s")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app->add_flag("--ignore-eos", f->o.ignore_eos, "Every answer runs to --max-tokens (models with random weights)");
  app->add_option("--port", f->o.port, "Port of the servers the benchmark starts")->capture_default_str();
  app->add_option("-t,--threads", f->o.threads, "--threads for the servers");
  app->add_option("--server-args", f->server_args, "Extra flags for every server, e.g. \"--prefill-size 256\"");
  app->add_option("--out", f->o.out_md, "Markdown report");
  app->add_option("--json", f->o.out_json, "JSON file with every raw measurement");
  app->add_option("--svg", f->o.out_svg, "SVG bar chart");
  app->add_option("--server-log", f->o.server_log, "Server log file, rewritten per configuration (default: $TMPDIR/nextn_bench_server.log)");
  app->add_option("--health-timeout", f->o.health_timeout_s, "Seconds to wait for /health")->capture_default_str();
  app->add_flag("!--no-progress", f->o.progress, "No progress display");
  app->add_option("--request-timeout", f->o.request_timeout_s, "Seconds per request")->capture_default_str();
  return {app, [f, app] {
            bench::BenchOptions o = f->o;
            o.contexts = parse_int_list(f->contexts, "--contexts");
            o.prompts = parse_word_list(f->prompts);
            o.configs = bench::parse_configs(f->configs, o.num_mtp_tokens);
            std::istringstream extra(f->server_args);
            for (std::string w; extra >> w;) o.server_flags.push_back(w);
            if (o.server_log.empty())
              o.server_log = (std::filesystem::temp_directory_path() / "nextn_bench_server.log").string();
            if (o.repeat < 1) fail(ErrorKind::kBadInput, "--repeat must be >= 1");
            if (o.max_tokens < 2) fail(ErrorKind::kBadInput, "--max-tokens must be >= 2");
            if (o.model_dir.empty() && o.url.empty()) {
              const char* env = std::getenv("NEXTN_MODEL");
              o.model_dir = env && *env ? env : NEXTN_DEFAULT_MODEL;
            }
            o.command_line = "nextn bench";
            for (const auto& opt : app->get_options()) {
              if (opt->count() == 0) continue;
              o.command_line += " " + opt->get_name();
              for (const auto& r : opt->results()) o.command_line += " " + r;
            }
            return bench::run_bench(o);
          }};
}

}  // namespace nextn
