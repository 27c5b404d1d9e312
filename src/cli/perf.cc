// cli/perf.cc — `nextn perf`: how fast this machine and nextn's kernels are.
//   nextn perf [--threads T] [--bandwidth-mib M] [--repeats R]
//              [--model DIR|FILE.gguf [--mmap] [--prefill P] [--decode-steps N] [--max-k K]]
//              [--kernels] [--json]
// Measures the streaming memory read bandwidth; with --model also decode tokens/s
// (batch 1), prefill tokens/s over P tokens, and the cost of one forward over k
// rows relative to one row for k = 1..K (what a speculative verify step costs),
// plus the effective GB/s of weights streamed per decode token as a fraction of
// the bandwidth, and the stored weight types (GB of matrices per type). For Mixture-of-
// Experts models the weights counted are those a decode row reads (top-k experts per
// layer), and the distinct experts per routed layer of each decode and verify forward
// are reported. A vision-language model (or --mmproj) also gets its vision encoder's time
// per picture at --image-sizes and that as a share of the machine's BF16 matmul rate.
// --kernels adds the matmul of every weight type on its own (cli/perf_kernels.cc).
// Every figure is the best of --repeats runs (the machine may be shared).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <vector>

#include "cli/command.h"
#include "cli/perf_kernels.h"
#include "kernels/cpu_extras.h"
#include "io/checkpoint.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "util/timer.h"
#include "vision/encoder.h"

namespace nextn {

namespace {

struct PerfFlags {
  int threads = 0;
  int bandwidth_mib = 2048;
  int repeats = 5;
  std::string model;
  bool mmap_weights = false;
  int prefill = 512;
  int decode_steps = 32;
  int max_k = 8;
  bool json = false;
  bool kernels = false;
  bool list_targets = false;
  std::string mmproj;
  std::vector<std::string> image_sizes = {"448x448", "1024x768"};
};

// The vision encoder's time per picture (vision/encoder.h), beside what the machine's BF16
// matmul does with as many rows, so its share of the machine's matrix rate shows.
struct EncoderPerf {
  std::string family;
  struct Image {
    int width = 0, height = 0;
    int64_t tokens = 0, patches = 0;
    double process_seconds = 0;  // resize and patches (the server's request thread)
    double encode_seconds = 0;   // the tower (the engine thread, at admission)
    double gflops = 0;           // the tower's matrix products per second
    double bf16_gflops = 0;      // a BF16 1024×4096 matmul over `patches` rows, on its own
  };
  std::vector<Image> images;
};

struct ModelPerf {
  std::string dir;
  std::string architecture;
  double weight_gb = 0;
  std::map<std::string, double> matrix_gb_by_type;  // stored type of the 2-D tensors → GB
  double load_seconds = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;            // per token
  std::vector<double> verify_seconds;  // index k-1: one forward over k rows
  // Mixture of Experts: distinct experts run per routed layer in a decode step and in a
  // verify of k rows (index k-1); empty for dense models.
  double decode_experts = 0;
  std::vector<double> verify_experts;
  // Rolling a verify of max_k rows back to its first row (one draft accepted): what the
  // rollback and the next decode step take beyond a plain decode step (recurrent layers
  // re-apply the kept row there); 0 when max_k is 1.
  double restore_seconds = 0;
};

std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, std::max(1, vocab) - 1);
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = dist(rng);
  return tokens;
}

// One forward of `tokens` appended to `kv`, logits for every row when all_logits.
double timed_forward(Model& model, SequenceState& kv, const std::vector<int32_t>& tokens, bool all_logits,
                     ForwardResult& result) {
  SequenceRows rows;
  rows.state = &kv;
  rows.snapshots = all_logits;  // a verify keeps every row's recurrent state (rolled back after)
  rows.tokens = tokens;
  if (all_logits) {
    for (size_t i = 0; i < tokens.size(); ++i) rows.logit_rows.push_back(static_cast<int>(i));
  } else {
    rows.logit_rows.push_back(static_cast<int>(tokens.size()) - 1);
  }
  Stopwatch watch;
  model.forward(std::span<SequenceRows>(&rows, 1), result);
  return watch.seconds();
}

ModelPerf measure_model(const PerfFlags& f) {
  ModelPerf perf;
  {
    // The weight types as stored (a GGUF file mixes them per tensor).
    auto ckpt = Checkpoint::open(f.model);
    for (const std::string& name : ckpt->tensor_names())
      if (const TensorView* t = ckpt->find(name); t && t->shape.size() >= 2)
        perf.matrix_gb_by_type[dtype_name(t->dtype)] += static_cast<double>(t->nbytes) / 1e9;
  }
  LoadOptions options;
  options.copy_weights = !f.mmap_weights;
  Stopwatch load_watch;
  auto model = Model::load(f.model, options);
  perf.load_seconds = load_watch.seconds();
  const ModelConfig& config = model->config();
  perf.dir = f.model;
  perf.architecture = config.architecture;
  perf.weight_gb = static_cast<double>(model->weight_bytes()) / 1e9;

  const int context = 64;  // decode and verify run after a short prompt
  auto kv = model->new_state(std::max(f.prefill, context + f.decode_steps + f.max_k) + 8, KvOptions{});
  ForwardResult result;
  const int vocab = config.vocab_size;

  // Warm-up (faults in mmap'd pages, sizes buffers).
  timed_forward(*model, *kv, random_tokens(context, vocab, 1), false, result);
  timed_forward(*model, *kv, random_tokens(1, vocab, 2), false, result);
  kv->return_to(0);

  // Prefill: one chunk of f.prefill tokens.
  perf.prefill_seconds = 1e30;
  const auto prompt = random_tokens(f.prefill, vocab, 3);
  for (int rep = 0; rep < std::max(1, f.repeats / 2); ++rep) {
    kv->return_to(0);
    perf.prefill_seconds = std::min(perf.prefill_seconds, timed_forward(*model, *kv, prompt, false, result));
  }

  // Decode: f.decode_steps single-token steps after a short prompt.
  kv->return_to(0);
  timed_forward(*model, *kv, random_tokens(context, vocab, 4), false, result);
  perf.decode_seconds = 1e30;
  const auto steps = random_tokens(f.decode_steps, vocab, 5);
  for (int rep = 0; rep < f.repeats; ++rep) {
    if (!kv->can_return_to(context)) {  // recurrent layers: decode rows are not snapshotted
      kv->return_to(0);
      timed_forward(*model, *kv, random_tokens(context, vocab, 4), false, result);
    }
    kv->return_to(context);
    double total = 0;
    const RoutedStats before = model->routed_stats();
    for (int32_t token : steps) total += timed_forward(*model, *kv, {token}, false, result);
    perf.decode_experts = std::max(0.0, model->routed_stats().experts_per_forward_since(before));
    perf.decode_seconds = std::min(perf.decode_seconds, total / std::max(1, f.decode_steps));
  }

  // Verify: one forward over k rows with logits for every row, rolled back each
  // time. Rounds visit k = 1..K in turn so every k sees the same machine load.
  perf.verify_seconds.assign(f.max_k, 1e30);
  perf.verify_experts.assign(f.max_k, 0.0);
  if (!kv->can_return_to(context)) {
    kv->return_to(0);
    timed_forward(*model, *kv, random_tokens(context, vocab, 4), false, result);
  }
  for (int rep = 0; rep < std::max(3, f.repeats); ++rep)
    for (int k = 1; k <= f.max_k; ++k) {
      const auto rows = random_tokens(k, vocab, 100 + k);
      kv->return_to(context);
      const RoutedStats before = model->routed_stats();
      perf.verify_seconds[k - 1] = std::min(perf.verify_seconds[k - 1], timed_forward(*model, *kv, rows, true, result));
      perf.verify_experts[k - 1] = std::max(0.0, model->routed_stats().experts_per_forward_since(before));
      if (k == f.max_k && k > 1) {
        Stopwatch restore;
        kv->return_to(context + 1);
        timed_forward(*model, *kv, random_tokens(1, vocab, 6), false, result);
        const double seconds = std::max(0.0, restore.seconds() - perf.decode_seconds);
        perf.restore_seconds = rep == 0 ? seconds : std::min(perf.restore_seconds, seconds);
        if (!kv->can_return_to(context)) {  // that decode row ended what recurrent layers can undo
          kv->return_to(0);
          timed_forward(*model, *kv, random_tokens(context, vocab, 4), false, result);
        }
      }
    }
  return perf;
}

// GFLOP/s of a BF16 [1024, 4096] matmul over `rows` rows: the machine's rate for the
// products an encoder runs, best of `repeats`.
double bf16_matmul_gflops(int64_t rows, int repeats) {
  constexpr int64_t kOut = 1024, kIn = 4096;
  std::vector<uint16_t> w(size_t(kOut * kIn));
  std::mt19937 rng(1);
  for (uint16_t& v : w) v = uint16_t(0x3c00 + (rng() & 0x3ff));  // bf16 values around 0.008..0.016
  std::vector<float> x(size_t(rows * kIn), 0.5f), y(size_t(rows * kOut));
  const WeightMatrix matrix{DType::kBF16, kOut, kIn, w.data()};
  matmul(matrix, x.data(), rows, y.data());
  double best = 1e30;
  for (int rep = 0; rep < repeats; ++rep) {
    Stopwatch watch;
    matmul(matrix, x.data(), rows, y.data());
    best = std::min(best, watch.seconds());
  }
  return 2.0 * double(rows) * kOut * kIn / best / 1e9;
}

// The encoder of --mmproj, or of the model's own checkpoint; nullopt when there is none.
std::optional<EncoderPerf> measure_encoder(const PerfFlags& f) {
  auto encoder = vision::load_vision_encoder(Checkpoint::open(f.mmproj.empty() ? f.model : f.mmproj), {}, {});
  if (!encoder) {
    if (!f.mmproj.empty()) fail(ErrorKind::kBadInput, "--mmproj {}: no vision tower nextn reads", f.mmproj);
    return std::nullopt;
  }
  EncoderPerf perf;
  perf.family = encoder->name();
  for (const std::string& size : f.image_sizes) {
    EncoderPerf::Image m;
    char tail = 0;
    if (std::sscanf(size.c_str(), "%dx%d%c", &m.width, &m.height, &tail) != 2 || m.width < 16 || m.height < 16)
      fail(ErrorKind::kBadInput, "--image-sizes: expected WxH (at least 16x16), got '{}'", size);
    const vision::DecodedImage picture = vision::test_picture(m.width, m.height, 7);
    Stopwatch process_watch;
    const vision::ProcessedImage image = encoder->process(picture);
    m.process_seconds = process_watch.seconds();
    m.tokens = image.n_tokens();
    m.patches = image.rows;
    encoder->encode(image);  // warm-up
    m.encode_seconds = 1e30;
    for (int rep = 0; rep < std::max(1, f.repeats / 2); ++rep) {
      Stopwatch watch;
      encoder->encode(image);
      m.encode_seconds = std::min(m.encode_seconds, watch.seconds());
    }
    m.gflops = encoder->matmul_flops(image) / m.encode_seconds / 1e9;
    m.bf16_gflops = bf16_matmul_gflops(m.patches, std::max(3, f.repeats));
    perf.images.push_back(m);
  }
  return perf;
}

// One line on Intel AMX: what the CPU and Linux offer, and that nextn does not use it.
std::string describe(const AmxSupport& amx) {
  if (!amx.tile) return "not in this CPU";
  std::string what = std::string("in this CPU (") + (amx.int8 ? "int8" : "") + (amx.int8 && amx.bf16 ? ", " : "") +
                     (amx.bf16 ? "bf16" : "") + ")";
  what += amx.linux_offers_tile_data ? ", Linux offers the tile state" : ", but Linux does not offer the tile state";
  return what + "; nextn has no AMX kernels yet (the SIMD target above runs)";
}

int run_perf(const PerfFlags& f) {
  if (f.list_targets) {
    for (const std::string& name : available_simd_targets()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (f.threads < 0) fail(ErrorKind::kBadInput, "--threads must be >= 0");
  if (f.bandwidth_mib < 64) fail(ErrorKind::kBadInput, "--bandwidth-mib must be >= 64");
  if (f.prefill < 1 || f.decode_steps < 1 || f.max_k < 1 || f.repeats < 1)
    fail(ErrorKind::kBadInput, "--prefill, --decode-steps, --max-k and --repeats must be >= 1");
  ThreadPool::set_global_threads(f.threads);
  const int threads = ThreadPool::global().size();
  const double bandwidth = measure_read_bandwidth_gbs(static_cast<size_t>(f.bandwidth_mib) << 20, f.repeats);

  const AmxSupport amx = amx_support();
  nlohmann::json out = {{"threads", threads},
                        {"simd_target", simd_target_name()},
                        {"amx", {{"cpu_tile", amx.tile}, {"cpu_int8", amx.int8}, {"cpu_bf16", amx.bf16},
                                 {"linux_offers_tile_data", amx.linux_offers_tile_data}, {"used", false}}},
                        {"read_bandwidth_gbs", bandwidth},
                        {"bandwidth_buffer_mib", f.bandwidth_mib},
                        {"repeats", f.repeats}};
  if (!f.json) {
    fmt::print("SIMD target        {}\n", simd_target_name());
    fmt::print("AMX                {}\n", describe(amx));
    fmt::print("threads            {}\n", threads);
    fmt::print("read bandwidth     {:.1f} GB/s  (best of {}, {} MiB buffer)\n", bandwidth, f.repeats,
               f.bandwidth_mib);
  }
  if (!f.model.empty()) {
    const ModelPerf p = measure_model(f);
    const double decode_tps = 1.0 / p.decode_seconds;
    const double streamed = p.weight_gb / p.decode_seconds;
    nlohmann::json verify = nlohmann::json::array();
    for (size_t i = 0; i < p.verify_seconds.size(); ++i)
      verify.push_back({{"k", i + 1},
                        {"ms", p.verify_seconds[i] * 1e3},
                        {"relative_to_k1", p.verify_seconds[i] / p.verify_seconds[0]},
                        {"distinct_experts_per_layer", p.verify_experts[i]}});
    const bool moe = p.decode_experts > 0;
    out["model"] = {{"dir", p.dir},
                    {"architecture", p.architecture},
                    {"weights", f.mmap_weights ? "mmap" : "copied"},
                    {"weight_gb", p.weight_gb},
                    {"matrix_gb_by_type", p.matrix_gb_by_type},
                    {"load_seconds", p.load_seconds},
                    {"decode_tokens_per_s", decode_tps},
                    {"decode_ms_per_token", p.decode_seconds * 1e3},
                    {"decode_weight_gbs", streamed},
                    {"decode_fraction_of_bandwidth", streamed / bandwidth},
                    {"prefill_tokens", f.prefill},
                    {"prefill_tokens_per_s", f.prefill / p.prefill_seconds},
                    {"verify", verify},
                    {"restore_ms", p.restore_seconds * 1e3}};
    if (moe) out["model"]["decode_distinct_experts_per_layer"] = p.decode_experts;
    if (!f.json) {
      fmt::print("model              {} ({}, {:.3f} GB weights, {}; loaded in {:.2f} s)\n", p.dir, p.architecture,
                 p.weight_gb, f.mmap_weights ? "mmap'd" : "copied", p.load_seconds);
      std::string types;
      for (const auto& [type, gb] : p.matrix_gb_by_type) types += fmt::format("{}{} {:.3f} GB", types.empty() ? "" : ", ", type, gb);
      fmt::print("weight types       {}\n", types);
      fmt::print("decode             {:.2f} tok/s  ({:.1f} ms/token, {:.1f} GB/s of weights = {:.0f}% of bandwidth)\n",
                 decode_tps, p.decode_seconds * 1e3, streamed, 100.0 * streamed / bandwidth);
      fmt::print("prefill            {:.1f} tok/s  ({} tokens in {:.2f} s)\n", f.prefill / p.prefill_seconds,
                 f.prefill, p.prefill_seconds);
      if (moe)
        fmt::print("experts            {:.1f} distinct per routed layer per decode step (weights above: those only)\n",
                   p.decode_experts);
      fmt::print("\nverify cost: one forward over k rows (logits for every row)\n");
      fmt::print("  k    ms     x k=1   ms/row{}\n", moe ? "  experts/layer" : "");
      for (size_t i = 0; i < p.verify_seconds.size(); ++i) {
        fmt::print("  {:<2} {:7.1f}  {:6.2f}  {:7.1f}", i + 1, p.verify_seconds[i] * 1e3,
                   p.verify_seconds[i] / p.verify_seconds[0], p.verify_seconds[i] * 1e3 / double(i + 1));
        if (moe) fmt::print("  {:8.1f}", p.verify_experts[i]);
        fmt::print("\n");
      }
      if (f.max_k > 1)
        fmt::print("restore            {:.4f} ms to keep 1 of {} verify rows, next step included ({:.2f}% of a decode step)\n",
                   p.restore_seconds * 1e3, f.max_k, 100.0 * p.restore_seconds / p.decode_seconds);
    }
  }
  if (!f.model.empty() || !f.mmproj.empty()) {
    if (const std::optional<EncoderPerf> e = measure_encoder(f)) {
      nlohmann::json images = nlohmann::json::array();
      if (!f.json) fmt::print("\nvision encoder ({}): time per picture\n  picture      tokens  patches  process ms  encode ms  GFLOP/s  "
                              "BF16 matmul GFLOP/s  share\n", e->family);
      for (const EncoderPerf::Image& m : e->images) {
        images.push_back({{"width", m.width}, {"height", m.height}, {"tokens", m.tokens}, {"patches", m.patches},
                          {"process_ms", m.process_seconds * 1e3}, {"encode_ms", m.encode_seconds * 1e3},
                          {"gflops", m.gflops}, {"bf16_matmul_gflops", m.bf16_gflops},
                          {"share_of_bf16_matmul", m.gflops / m.bf16_gflops}});
        if (!f.json)
          fmt::print("  {:>5}x{:<5} {:7} {:8} {:11.1f} {:10.1f} {:8.1f} {:20.1f}  {:4.0f}%\n", m.width, m.height, m.tokens,
                     m.patches, m.process_seconds * 1e3, m.encode_seconds * 1e3, m.gflops, m.bf16_gflops,
                     100.0 * m.gflops / m.bf16_gflops);
      }
      out["vision_encoder"] = {{"family", e->family}, {"images", images}};
    }
  }
  if (f.kernels) out["kernels"] = measure_kernels(f.repeats, !f.json);
  if (f.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

Command add_perf_command(CLI::App& root) {
  auto flags = std::make_shared<PerfFlags>();
  CLI::App* app = root.add_subcommand("perf", "Measure memory bandwidth and model decode/prefill/verify speed");
  app->add_option("--threads", flags->threads, "Compute threads (default: physical cores)");
  app->add_option("--bandwidth-mib", flags->bandwidth_mib, "Buffer size for the bandwidth test (MiB)");
  app->add_option("--repeats", flags->repeats, "Runs per measurement; the best is reported");
  app->add_option("--model", flags->model, "Checkpoint directory to measure");
  app->add_flag("--mmap", flags->mmap_weights, "Serve weights from the mmap instead of copying them");
  app->add_option("--prefill", flags->prefill, "Prefill length in tokens");
  app->add_option("--decode-steps", flags->decode_steps, "Decode steps per run");
  app->add_option("--max-k", flags->max_k, "Largest verify batch measured");
  app->add_flag("--kernels", flags->kernels, "Also time the matmul of every weight type on its own");
  app->add_option("--mmproj", flags->mmproj, "Vision projector GGUF whose encoder to time (else the model's own)");
  app->add_option("--image-sizes", flags->image_sizes, "Picture sizes WxH the vision encoder is timed on")
      ->capture_default_str();
  app->add_flag("--json", flags->json, "Print one JSON object instead of the table");
  app->add_flag("--simd-targets", flags->list_targets,
                "List the SIMD targets this build and CPU offer, best first (for NEXTN_SIMD=NAME), and exit");
  return {app, [flags] { return run_perf(*flags); }};
}

}  // namespace nextn
