// cli/perf.cc — `nextn perf`: how fast this machine and nextn's kernels are.
//   nextn perf [--threads T] [--bandwidth-mib M] [--repeats R]
//              [--model DIR|FILE.gguf [--mmap] [--prefill P[,P...]] [--decode-steps N] [--max-k K]
//                                     [--contexts N,N...] [--kv-type T]]
//              [--kernels] [--json]
// Measures the streaming memory read bandwidth; with --model also decode tokens/s
// (batch 1), prefill tokens/s over P tokens, and the cost of one forward over k
// rows relative to one row for k = 1..K (what a speculative verify step costs),
// plus the effective GB/s of weights streamed per decode token as a fraction of
// the bandwidth, and the stored weight types (GB of matrices per type). For Mixture-of-
// Experts models the weights counted are those a decode row reads (top-k experts per
// layer), and the distinct experts per routed layer of each decode and verify forward
// are reported. --contexts adds decode after long contexts (KV rows written straight into
// the cache) with the bytes a token reads there, weights plus KV rows, against the
// bandwidth (cli/perf_model.cc). A vision-language model (or --mmproj) also gets its vision encoder's time
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
#include "cli/perf_model.h"
#include "io/checkpoint.h"
#include "kernels/cpu_extras.h"
#include "kernels/kernels.h"
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
  std::vector<int> prefill = {512};
  int decode_steps = 32;
  int max_k = 8;
  int sequences = 1;
  std::vector<int> contexts;
  std::string kv_type = "f16";
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
  if (f.prefill.empty() || *std::min_element(f.prefill.begin(), f.prefill.end()) < 1 || f.decode_steps < 1 ||
      f.max_k < 1 || f.sequences < 1 || f.repeats < 1)
    fail(ErrorKind::kBadInput, "--prefill, --decode-steps, --max-k, --sequences and --repeats must be >= 1");
  for (int n : f.contexts)
    if (n < 1) fail(ErrorKind::kBadInput, "--contexts: lengths must be >= 1, got {}", n);
  const KvType kv_type = parse_kv_type(f.kv_type);
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
    ModelPerfOptions options;
    options.model = f.model;
    options.mmap_weights = f.mmap_weights;
    options.prefill = f.prefill;
    options.decode_steps = f.decode_steps;
    options.max_k = f.max_k;
    options.sequences = f.sequences;
    options.repeats = f.repeats;
    options.contexts = f.contexts;
    options.kv.type = kv_type;
    const ModelPerf p = measure_model(options);
    const double decode_tps = 1.0 / p.decode_seconds;
    const double streamed = p.weight_gb / p.decode_seconds;
    nlohmann::json prefill = nlohmann::json::array();
    for (size_t i = 0; i < f.prefill.size(); ++i)
      prefill.push_back({{"tokens", f.prefill[i]},
                         {"tokens_per_s", f.prefill[i] / p.prefill_seconds[i]},
                         {"seconds", p.prefill_seconds[i]}});
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
                    {"prefill_tokens", f.prefill[0]},
                    {"prefill_tokens_per_s", f.prefill[0] / p.prefill_seconds[0]},
                    {"prefill", prefill},
                    {"verify", verify},
                    {"verify_sequences", f.sequences},
                    {"restore_ms", p.restore_seconds * 1e3},
                    {"kv_type", f.kv_type}};
    // Long contexts: a decode token reads the weights and every stored KV row (a sliding
    // layer's ring holds about its window), so their sum per second against the measured
    // read bandwidth is how close decode runs to the memory's limit.
    nlohmann::json contexts = nlohmann::json::array();
    for (const ContextPerf& c : p.contexts) {
      const double gb = p.weight_gb + c.kv_gb;
      contexts.push_back({{"context", c.context},
                          {"decode_tokens_per_s", 1.0 / c.decode_seconds},
                          {"decode_ms_per_token", c.decode_seconds * 1e3},
                          {"kv_gb", c.kv_gb},
                          {"read_gb_per_token", gb},
                          {"read_gbs", gb / c.decode_seconds},
                          {"fraction_of_bandwidth", gb / c.decode_seconds / bandwidth}});
    }
    if (!p.contexts.empty()) out["model"]["contexts"] = contexts;
    if (moe) out["model"]["decode_distinct_experts_per_layer"] = p.decode_experts;
    if (!f.json) {
      fmt::print("model              {} ({}, {:.3f} GB weights, {}; loaded in {:.2f} s)\n", p.dir, p.architecture,
                 p.weight_gb, f.mmap_weights ? "mmap'd" : "copied", p.load_seconds);
      std::string types;
      for (const auto& [type, gb] : p.matrix_gb_by_type) types += fmt::format("{}{} {:.3f} GB", types.empty() ? "" : ", ", type, gb);
      fmt::print("weight types       {}\n", types);
      fmt::print("decode             {:.2f} tok/s  ({:.1f} ms/token, {:.1f} GB/s of weights = {:.0f}% of bandwidth)\n",
                 decode_tps, p.decode_seconds * 1e3, streamed, 100.0 * streamed / bandwidth);
      for (size_t i = 0; i < f.prefill.size(); ++i)
        fmt::print("prefill            {:.1f} tok/s  ({} tokens in {:.2f} s)\n", f.prefill[i] / p.prefill_seconds[i],
                   f.prefill[i], p.prefill_seconds[i]);
      if (moe)
        fmt::print("experts            {:.1f} distinct per routed layer per decode step (weights above: those only)\n",
                   p.decode_experts);
      if (f.sequences == 1)
        fmt::print("\nverify cost: one forward over k rows (logits for every row)\n");
      else
        fmt::print("\nverify cost: one forward over k rows of each of {} sequences (logits for every row; ms/row per "
                   "sequence)\n",
                   f.sequences);
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
      if (!p.contexts.empty()) {
        fmt::print("\ndecode after a long context ({} KV): a token reads the weights and the stored KV rows\n",
                   f.kv_type);
        fmt::print("  context   tok/s  ms/token  KV GB  read GB/token   GB/s  of bandwidth\n");
        for (const ContextPerf& c : p.contexts) {
          const double gb = p.weight_gb + c.kv_gb;
          fmt::print("  {:>7} {:7.2f} {:9.1f} {:6.3f} {:14.3f} {:6.1f}  {:5.0f}%\n", c.context, 1.0 / c.decode_seconds,
                     c.decode_seconds * 1e3, c.kv_gb, gb, gb / c.decode_seconds, 100.0 * gb / c.decode_seconds / bandwidth);
        }
      }
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
  app->add_option("--prefill", flags->prefill, "Prefill lengths in tokens, each one chunk (e.g. 512,4096)")
      ->delimiter(',');
  app->add_option("--decode-steps", flags->decode_steps, "Decode steps per run");
  app->add_option("--max-k", flags->max_k, "Largest verify batch measured");
  app->add_option("--sequences", flags->sequences,
                  "Verify cost over this many sequences at once, each with the k rows (a batched step)");
  app->add_option("--contexts", flags->contexts,
                  "Also time decode after these context lengths (KV rows filled directly, e.g. 8192,32768)")
      ->delimiter(',');
  app->add_option("--kv-type", flags->kv_type, "KV storage: f32, f16, bf16, q8, q4, turbo3, turbo4")
      ->capture_default_str();
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
