// cli/kv_eval.cc — `nextn kv-eval`: measures the KV storage types against the
// full-precision cache on one model.
//
// Quality (default): for each text, the first --ctx tokens are run through the
// model in prefill chunks once per storage type (in lockstep with the reference
// type, F16 by default). Per type: mean KL(reference ‖ type) of the next-token
// distributions over all rows, perplexity of the text, top-1 agreement.
// Speed (--speed): for each context length the cache is filled with synthetic
// (random) keys/values for every layer, then --steps single-token decode steps
// of the real model run on top of it; reports decode tok/s and KV bytes/token.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/logit_stats.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace nextn {
namespace {

struct KvEvalFlags {
  std::string model_dir;
  std::vector<std::string> texts;
  std::string types = "f16,q8,q4,turbo4,turbo3";
  std::string reference = "f16";
  int ctx = 1024;
  int chunk = 128;
  int group_size = 64;
  int compress_after = 2048;
  int keep_recent = 256;
  int threads = 0;
  bool speed = false;
  std::string contexts = "512,8192,32768,100000";
  int steps = 8;
  int decode_threads = 0;  // --speed: threads for the timed steps (0: same as --threads)
  std::string json_out;
};

// CPU seconds of the whole process (all threads): a load-independent work measure.
double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

KvOptions options_for(const std::string& type, const KvEvalFlags& f) {
  KvOptions o;
  o.type = parse_kv_type(type);
  o.group_size = f.group_size;
  o.compress_after = f.compress_after;
  o.keep_recent = f.keep_recent;
  return o;
}

struct TypeStats {
  std::string name;
  LogitStats logits;
  size_t bytes = 0, f16_bytes = 0;
  int tokens = 0;
};

int run_quality(const KvEvalFlags& f, Model& model) {
  if (f.texts.empty()) fail(ErrorKind::kBadInput, "kv-eval: give at least one --text file");
  auto tokenizer = Tokenizer::load(model.dir());
  const int V = model.config().vocab_size;
  std::vector<std::string> types = split(f.types);
  nlohmann::json report = nlohmann::json::array();
  for (const std::string& path : f.texts) {
    std::vector<int32_t> tokens = tokenizer->encode(read_file(path), false);
    if (static_cast<int>(tokens.size()) > f.ctx) tokens.resize(f.ctx);
    const int n = static_cast<int>(tokens.size());
    if (n < 2) fail(ErrorKind::kBadInput, "{}: fewer than 2 tokens", path);
    auto ref = model.new_state(n, options_for(f.reference, f));
    std::vector<std::unique_ptr<SequenceState>> caches;
    std::vector<TypeStats> stats(types.size() + 1);
    stats[0].name = f.reference;
    for (size_t i = 0; i < types.size(); ++i) {
      caches.push_back(model.new_state(n, options_for(types[i], f)));
      stats[i + 1].name = types[i];
    }
    ForwardResult result;
    std::vector<float> ref_logits;
    Stopwatch sw;
    for (int start = 0; start < n; start += f.chunk) {
      const int m = std::min(f.chunk, n - start);
      SequenceRows rows;
      rows.tokens = std::span<const int32_t>(tokens.data() + start, m);
      for (int i = 0; i < m; ++i) rows.logit_rows.push_back(i);
      for (size_t c = 0; c <= caches.size(); ++c) {
        rows.state = c == 0 ? ref.get() : caches[c - 1].get();
        model.forward(std::span<SequenceRows>(&rows, 1), result);
        if (c == 0) ref_logits = result.logits;
        for (int i = 0; i < m; ++i) {
          const int pos = start + i;
          stats[c].logits.add(ref_logits.data() + size_t(i) * V, result.logits.data() + size_t(i) * V, V,
                              pos + 1 < n ? tokens[pos + 1] : -1);
        }
      }
    }
    for (size_t c = 0; c <= caches.size(); ++c) {
      SequenceState& kv = c == 0 ? *ref : *caches[c - 1];
      stats[c].bytes = kv.attention_bytes();
      stats[c].f16_bytes = kv.attention_f16_equivalent_bytes();
      stats[c].tokens = kv.length();
    }
    std::printf("text %s: %d tokens, chunk %d, %.1f s\n", path.c_str(), n, f.chunk, sw.seconds());
    std::printf("  %-8s %12s %10s %9s %14s %8s\n", "type", "mean KL", "PPL", "top1 %", "KV bytes/tok", "vs f16");
    for (const TypeStats& st : stats) {
      const double ppl = st.logits.perplexity();
      const double per_tok = double(st.bytes) / std::max(1, st.tokens);
      const double ratio = double(st.f16_bytes) / std::max<size_t>(1, st.bytes);
      std::printf("  %-8s %12.6f %10.4f %9.2f %14.0f %7.2fx\n", st.name.c_str(), st.logits.mean_kl(), ppl,
                  100.0 * st.logits.top1_agreement(), per_tok, ratio);
      report.push_back({{"text", path}, {"tokens", n}, {"type", st.name}, {"mean_kl", st.logits.mean_kl()},
                        {"ppl", ppl}, {"top1_agree", st.logits.top1_agreement()},
                        {"kv_bytes_per_token", per_tok}, {"compression_vs_f16", ratio},
                        {"compress_after", f.compress_after}, {"keep_recent", f.keep_recent},
                        {"group_size", f.group_size}});
    }
    std::fflush(stdout);
  }
  if (!f.json_out.empty()) std::ofstream(f.json_out) << report.dump(2) << "\n";
  return 0;
}

int run_speed(const KvEvalFlags& f, Model& model) {
  std::vector<std::string> types = split(f.types);
  nlohmann::json report = nlohmann::json::array();
  std::printf("%-8s %8s %12s %14s %14s %8s %10s\n", "type", "context", "decode tok/s", "tok/CPU-s", "KV bytes/tok",
              "vs f16", "fill s");
  for (const std::string& c : split(f.contexts)) {
    const int ctx = std::stoi(c);
    for (const std::string& type : types) {
      auto kv = model.new_state(ctx + f.steps + 1, options_for(type, f));
      // Synthetic history: unit-variance random keys/values, written through append()
      // into every attention layer's cache (recurrent layers keep their empty state).
      const int piece = 1024;
      std::mt19937 rng(7);
      std::normal_distribution<float> nd;
      Stopwatch fill;
      kv->begin_rows(ctx, false);
      const std::vector<LayerSpec>& layers = model.config().layers;
      for (int layer = 0; layer < int(layers.size()); ++layer) {
        if (layers[size_t(layer)].mixer == MixerKind::kGatedDeltaNet) continue;
        const size_t width = size_t(layers[size_t(layer)].attention.kv_heads) * layers[size_t(layer)].attention.head_dim;
        std::vector<float> k(piece * width), v(piece * width);
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        const AttentionSlot slot = kv->attention(layer);
        for (int p = 0; p < ctx; p += piece) {
          const int m = std::min(piece, ctx - p);
          // Rotate the data a little per piece so blocks differ.
          std::rotate(k.begin(), k.begin() + 1 + (p / piece) % 7, k.end());
          slot.cache->append(slot.layer, p, m, k.data(), v.data());
        }
      }
      kv->end_rows();
      const double fill_s = fill.seconds();
      const int fill_threads = ThreadPool::global().size();
      if (f.decode_threads > 0) ThreadPool::set_global_threads(f.decode_threads);
      ForwardResult result;
      int32_t token = 1;
      // One warm-up step, then timed steps.
      double seconds = 0, cpu = 0;
      for (int step = 0; step <= f.steps; ++step) {
        SequenceRows rows;
        rows.state = kv.get();
        rows.tokens = std::span<const int32_t>(&token, 1);
        rows.logit_rows = {0};
        Stopwatch sw;
        const double c0 = process_cpu_seconds();
        model.forward(std::span<SequenceRows>(&rows, 1), result);
        if (step > 0) seconds += sw.seconds(), cpu += process_cpu_seconds() - c0;
        token = static_cast<int32_t>(std::max_element(result.logits.begin(), result.logits.end()) - result.logits.begin());
      }
      const int decode_threads = ThreadPool::global().size();
      if (f.decode_threads > 0) ThreadPool::set_global_threads(fill_threads);
      const double tps = f.steps / seconds;
      const double per_tok = double(kv->attention_bytes()) / kv->length();
      const double ratio = double(kv->attention_f16_equivalent_bytes()) / kv->attention_bytes();
      std::printf("%-8s %8d %12.2f %14.2f %14.0f %7.2fx %10.1f\n", type.c_str(), ctx, tps, f.steps / cpu, per_tok, ratio,
                  fill_s);
      std::fflush(stdout);
      report.push_back({{"type", type}, {"context", ctx}, {"decode_tok_s", tps}, {"decode_tok_per_cpu_s", f.steps / cpu},
                        {"kv_bytes_per_token", per_tok},
                        {"compression_vs_f16", ratio}, {"steps", f.steps}, {"fill", "synthetic"},
                        {"threads", decode_threads}});
    }
  }
  if (!f.json_out.empty()) std::ofstream(f.json_out) << report.dump(2) << "\n";
  return 0;
}

int run_kv_eval(const KvEvalFlags& f) {
  if (f.threads > 0) ThreadPool::set_global_threads(f.threads);
  if (f.chunk < 1) fail(ErrorKind::kBadInput, "--chunk must be >= 1");
  if (f.steps < 1) fail(ErrorKind::kBadInput, "--steps must be >= 1");
  std::unique_ptr<Model> model = Model::load(f.model_dir);
  return f.speed ? run_speed(f, *model) : run_quality(f, *model);
}

}  // namespace

Command add_kv_eval_command(CLI::App& root) {
  auto flags = std::make_shared<KvEvalFlags>();
  CLI::App* app = root.add_subcommand("kv-eval", "Measure KV storage types: KL/perplexity vs F16, or decode speed");
  app->add_option("-m,--model", flags->model_dir, "Hugging Face checkpoint directory")->required();
  app->add_option("--text", flags->texts, "Text file(s) to evaluate on (quality mode)");
  app->add_option("--types", flags->types, "Comma-separated storage types to compare")->capture_default_str();
  app->add_option("--reference", flags->reference, "Reference storage type")->capture_default_str();
  app->add_option("-c,--ctx", flags->ctx, "Tokens of each text to evaluate")->capture_default_str();
  app->add_option("--chunk", flags->chunk, "Prefill chunk size")->capture_default_str();
  app->add_option("--kv-group-size", flags->group_size, "Group size of q8/q4")->capture_default_str();
  app->add_option("--turbo-after", flags->compress_after, "TurboQuant: compress past this many tokens")->capture_default_str();
  app->add_option("--turbo-keep-recent", flags->keep_recent, "TurboQuant: recent tokens kept in F16")->capture_default_str();
  app->add_option("-t,--threads", flags->threads, "Compute threads (default: physical cores)");
  app->add_flag("--speed", flags->speed, "Decode speed at --contexts with a synthetic KV history");
  app->add_option("--contexts", flags->contexts, "Context lengths for --speed")->capture_default_str();
  app->add_option("--steps", flags->steps, "Timed decode steps per measurement")->capture_default_str();
  app->add_option("--decode-threads", flags->decode_threads, "--speed: threads for the timed decode steps");
  app->add_option("--json", flags->json_out, "Also write the results as JSON");
  return Command{app, [flags] { return run_kv_eval(*flags); }};
}

}  // namespace nextn
