// cli/weight_eval.cc — `nextn weight-eval`: what quantizing the weights costs in quality.
//
// The reference checkpoint (BF16, say) and each candidate (GGUF files, MLX checkpoints
// of the same model) run the same texts in prefill chunks, in lockstep, one model in
// memory beside the reference at a time. Per candidate: mean KL(reference ‖ candidate)
// of the next-token distributions over all rows, perplexity of the text, top-1
// agreement with the reference, and the bytes of weights a decode step streams.
// Every candidate must have the reference's vocabulary; texts are tokenized with the
// reference's tokenizer (a quantized file of the same model gives the same ids).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
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

struct WeightEvalFlags {
  std::string reference;
  std::vector<std::string> candidates;
  std::vector<std::string> texts;
  int ctx = 512;
  int chunk = 128;
  int threads = 0;
  std::string json_out;
};

// The logits of every position of `tokens`, [n, vocab], run in chunks of `chunk`.
std::vector<float> all_logits(Model& model, const std::vector<int32_t>& tokens, int chunk) {
  const int n = static_cast<int>(tokens.size()), V = model.config().vocab_size;
  KvOptions exact;  // F32 keys/values: only the weights differ between the models
  exact.type = KvType::kF32;
  auto kv = model.new_state(n, exact);
  std::vector<float> out(size_t(n) * V);
  ForwardResult result;
  for (int start = 0; start < n; start += chunk) {
    const int m = std::min(chunk, n - start);
    SequenceRows rows;
    rows.state = kv.get();
    rows.tokens = std::span<const int32_t>(tokens.data() + start, m);
    for (int i = 0; i < m; ++i) rows.logit_rows.push_back(i);
    model.forward(std::span<SequenceRows>(&rows, 1), result);
    std::copy(result.logits.begin(), result.logits.end(), out.begin() + size_t(start) * V);
  }
  return out;
}

int run_weight_eval(const WeightEvalFlags& f) {
  if (f.threads > 0) ThreadPool::set_global_threads(f.threads);
  if (f.texts.empty()) fail(ErrorKind::kBadInput, "weight-eval: give at least one --text file");
  if (f.chunk < 1) fail(ErrorKind::kBadInput, "--chunk must be >= 1");
  if (f.ctx < 2) fail(ErrorKind::kBadInput, "--ctx must be >= 2");
  std::unique_ptr<Model> reference = Model::load(f.reference);
  const int V = reference->config().vocab_size;
  auto tokenizer = Tokenizer::load(reference->dir());

  // The texts' tokens and the reference's logits, computed once.
  std::vector<std::vector<int32_t>> texts;
  std::vector<std::vector<float>> ref_logits;
  std::vector<LogitStats> ref_stats(f.texts.size());
  for (size_t t = 0; t < f.texts.size(); ++t) {
    std::vector<int32_t> tokens = tokenizer->encode(read_file(f.texts[t]), false);
    if (static_cast<int>(tokens.size()) > f.ctx) tokens.resize(size_t(f.ctx));
    if (tokens.size() < 2) fail(ErrorKind::kBadInput, "{}: fewer than 2 tokens", f.texts[t]);
    ref_logits.push_back(all_logits(*reference, tokens, f.chunk));
    const int n = static_cast<int>(tokens.size());
    for (int i = 0; i < n; ++i) {
      const float* row = ref_logits.back().data() + size_t(i) * V;
      ref_stats[t].add(row, row, V, i + 1 < n ? tokens[size_t(i) + 1] : -1);
    }
    texts.push_back(std::move(tokens));
  }

  nlohmann::json report = nlohmann::json::array();
  std::printf("%-44s %-28s %7s %12s %10s %8s %10s\n", "model", "text", "tokens", "mean KL", "PPL", "top1 %",
              "weights GB");
  auto print = [&](const std::string& name, size_t t, const LogitStats& st, size_t bytes) {
    std::printf("%-44s %-28s %7zu %12.6f %10.4f %8.2f %10.3f\n", name.c_str(), f.texts[t].c_str(), texts[t].size(),
                st.mean_kl(), st.perplexity(), 100.0 * st.top1_agreement(), double(bytes) / 1e9);
    std::fflush(stdout);
    report.push_back({{"model", name}, {"text", f.texts[t]}, {"tokens", texts[t].size()}, {"mean_kl", st.mean_kl()},
                      {"ppl", st.perplexity()}, {"top1_agree", st.top1_agreement()}, {"weight_bytes", bytes}});
  };
  for (size_t t = 0; t < texts.size(); ++t) print(f.reference + " (reference)", t, ref_stats[t], reference->weight_bytes());

  for (const std::string& path : f.candidates) {
    std::unique_ptr<Model> candidate = Model::load(path);
    if (candidate->config().vocab_size != V)
      fail(ErrorKind::kBadInput, "{}: vocabulary of {} tokens, but the reference {} has {}", path,
           candidate->config().vocab_size, f.reference, V);
    for (size_t t = 0; t < texts.size(); ++t) {
      const std::vector<float> logits = all_logits(*candidate, texts[t], f.chunk);
      LogitStats st;
      const int n = static_cast<int>(texts[t].size());
      for (int i = 0; i < n; ++i)
        st.add(ref_logits[t].data() + size_t(i) * V, logits.data() + size_t(i) * V, V,
               i + 1 < n ? texts[t][size_t(i) + 1] : -1);
      print(path, t, st, candidate->weight_bytes());
    }
  }
  if (!f.json_out.empty()) std::ofstream(f.json_out) << report.dump(2) << "\n";
  return 0;
}

}  // namespace

Command add_weight_eval_command(CLI::App& root) {
  auto flags = std::make_shared<WeightEvalFlags>();
  CLI::App* app = root.add_subcommand(
      "weight-eval", "Measure quantized weights against a reference checkpoint: KL, perplexity, top-1 agreement");
  app->add_option("-m,--reference", flags->reference, "Reference checkpoint (e.g. the BF16 original)")->required();
  app->add_option("candidates", flags->candidates, "Checkpoints to compare (GGUF files, MLX or float directories)")
      ->required();
  app->add_option("--text", flags->texts, "Text file(s) to evaluate on")->required();
  app->add_option("-c,--ctx", flags->ctx, "Tokens of each text to evaluate")->capture_default_str();
  app->add_option("--chunk", flags->chunk, "Prefill chunk size")->capture_default_str();
  app->add_option("-t,--threads", flags->threads, "Compute threads (default: physical cores)");
  app->add_option("--json", flags->json_out, "Also write the results as JSON");
  return Command{app, [flags] { return run_weight_eval(*flags); }};
}

}  // namespace nextn
