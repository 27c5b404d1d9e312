// cli/generate.cc — `nextn generate`: one request through an Engine.
//   nextn generate [--model DIR] (--prompt-tokens 1,2,3 | --prompt TEXT) -n N
//       [--temp T --top-k K --top-p P --min-p M --seed S ...] [engine flags: --mtp ...]
//   (or --chat TEXT: one user turn through the model's chat template)
// Prints the generated text as it is produced (ids with --prompt-tokens or --ids),
// then the timing line `prompt: N tokens, X tok/s | decode: M tokens, Y tok/s |
// draft acceptance a/t (x%)` and, when drafting, the acceptance per draft position and the
// depths chosen; --compare-plain adds the speed of the same request decoded without drafting.
#include <cstdio>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/command.h"
#include "cli/engine_options.h"
#include "cli/flag_checks.h"
#include "engine/engine.h"
#include "speculative/counters.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "tokenizer/end_tokens.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"
#include "util/log.h"

namespace nextn {

namespace {

struct GenerateFlags {
  EngineFlags engine;
  std::string prompt_tokens;
  std::string prompt;
  std::string chat;
  int n = 64;
  SamplingParams sampling;
  bool seed_given = false;
  bool ids = false;
  bool ignore_eos = false;
  bool quiet = false;
  bool verbose = false;
  int repeat = 1;
  bool compare_plain = false;  // also decode the same request without drafting, alternating
  std::string json_schema_file, grammar_file;  // structured output
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      ids.push_back(int32_t(v));
    } catch (...) {
      fail(ErrorKind::kBadInput, "--prompt-tokens: '{}' is not a token id", item);
    }
  }
  return ids;
}

int run_generate(GenerateFlags& f) {
  if (int(!f.prompt_tokens.empty()) + int(!f.prompt.empty()) + int(!f.chat.empty()) != 1)
    fail(ErrorKind::kBadInput, "give exactly one of --prompt-tokens, --prompt or --chat");
  if (f.n < 0) fail(ErrorKind::kBadInput, "-n must be >= 0");
  if (!f.verbose) set_log_level(LogLevel::kWarn);
  EngineOptions options = resolve_engine_options(f.engine);
  options.parallel = 1;
  if (options.speculative.synthetic_accept >= 0 && !f.engine.benchmark_mode)
    log_warn("--spec-synthetic-accept {:.2f}: output does NOT follow the model (benchmark only)",
             options.speculative.synthetic_accept);

  std::unique_ptr<Tokenizer> tokenizer;
  GenerationRequest req;
  bool print_ids = f.ids || !f.prompt_tokens.empty();
  if (f.prompt_tokens.empty() || !print_ids) tokenizer = Tokenizer::load(options.model_dir);
  if (!f.chat.empty()) {
    // One user turn through the model's chat template, ready for the assistant's reply.
    ChatTemplate chat = ChatTemplate::from_model_dir(options.model_dir);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", f.chat}});
    std::string text = chat.render(messages, nlohmann::ordered_json(), true, nlohmann::ordered_json::object());
    req.prompt = tokenizer->encode(text, false);
  } else {
    req.prompt = f.prompt_tokens.empty() ? tokenizer->encode(f.prompt, true) : parse_ids(f.prompt_tokens);
  }

  Engine engine(options);
  const ModelConfig& config = engine.model().config();
  req.max_tokens = f.n;
  req.sampling = f.sampling;
  req.sampling.has_seed = f.seed_given;
  if (!f.ignore_eos) {
    // A chat turn also ends at the end-of-turn tokens; a plain prompt at eos only.
    if (tokenizer) req.stop_tokens = end_of_generation_tokens(*tokenizer, config.eos_token_ids, !f.chat.empty());
    else req.stop_tokens.assign(config.eos_token_ids.begin(), config.eos_token_ids.end());
  }

  // Structured output: a JSON Schema or a GBNF grammar file (llama-cli's -j / --grammar-file).
  std::shared_ptr<grammar::CompiledGrammar> compiled;  // shared by the --repeat runs, like the server's cache
  if (!f.json_schema_file.empty() || !f.grammar_file.empty()) {
    if (!f.json_schema_file.empty() && !f.grammar_file.empty()) fail(ErrorKind::kBadInput, "give --json-schema or --grammar, not both");
    if (!tokenizer) tokenizer = Tokenizer::load(options.model_dir);
    std::string gbnf;
    try {
      gbnf = f.grammar_file.empty() ? grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(read_file(f.json_schema_file)))
                                    : read_file(f.grammar_file);
      compiled = std::make_shared<grammar::CompiledGrammar>(
          std::make_shared<grammar::Grammar>(grammar::parse_gbnf(gbnf)),
          std::make_shared<grammar::TokenTrie>(vocabulary_bytes(*tokenizer, config.vocab_size)));
    } catch (const std::exception& e) {
      fail(ErrorKind::kBadInput, "{}: {}", f.grammar_file.empty() ? f.json_schema_file : f.grammar_file, e.what());
    }
  }

  std::unique_ptr<StreamDecoder> decoder;
  if (!print_ids) decoder = std::make_unique<StreamDecoder>(*tokenizer, true);
  if (!print_ids && !f.prompt.empty() && !f.quiet) {
    std::fputs(f.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  bool first = true;
  bool echo = true;  // only the first of --repeat runs prints its tokens
  std::vector<int32_t> run_tokens;  // this run's tokens (--compare-plain checks they agree)
  req.on_token = [&](const TokenEvent& ev) {
    run_tokens.push_back(ev.token);
    if (!echo) return true;
    if (print_ids) {
      std::printf(first ? "%d" : " %d", ev.token);
    } else {
      std::string piece = decoder->push(ev.token);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
    }
    first = false;
    std::fflush(stdout);
    return true;
  };
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  FinishReason reason = FinishReason::kNone;
  Timings timings;
  std::string error;
  req.on_done = [&](FinishReason r, const Timings& t, const std::string& e) {
    std::lock_guard lock(mu);
    reason = r;
    timings = t;
    error = e;
    done = true;
    cv.notify_all();
  };
  // --repeat R: the same request R times on the warm engine; the timing line
  // reports the run with the fastest decode (benchmarking on a noisy machine). With
  // --compare-plain every run is followed by the same request without drafting.
  auto run_once = [&](bool speculative) {
    {
      std::lock_guard lock(mu);
      done = false;
    }
    run_tokens.clear();
    req.speculative = speculative;
    if (compiled)  // a fresh constraint per run: it follows one sequence
      req.constraint = std::make_shared<grammar::GrammarConstraint>(compiled, req.stop_tokens);
    engine.submit(req);
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
    return timings.predicted_ms > 0 ? std::max(0, timings.predicted_n - 1) / timings.predicted_ms * 1e3 : 0.0;
  };
  auto failed = [&] { return reason == FinishReason::kError || reason == FinishReason::kInvalidRequest; };
  Timings best, best_plain;
  double best_tps = -1.0, best_plain_tps = -1.0;
  bool same_tokens = true;
  for (int run = 0; run < std::max(1, f.repeat); ++run) {
    const double tps = run_once(true);
    echo = false;
    if (failed()) break;
    if (tps > best_tps) {
      best_tps = tps;
      best = timings;
    }
    if (!f.compare_plain) continue;
    const std::vector<int32_t> speculative_tokens = run_tokens;
    const double plain_tps = run_once(false);
    if (failed()) break;
    same_tokens = same_tokens && run_tokens == speculative_tokens;
    if (plain_tps > best_plain_tps) {
      best_plain_tps = plain_tps;
      best_plain = timings;
    }
  }
  if (!failed()) timings = best;
  if (decoder) {
    std::string rest = decoder->flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
  }
  std::printf("\n");
  if (reason == FinishReason::kError) fail(ErrorKind::kInternal, "generation failed: {}", error);
  if (reason == FinishReason::kInvalidRequest) fail(ErrorKind::kBadInput, "{}", error);

  const Timings& t = timings;
  double prompt_tps = t.prompt_ms > 0 ? t.prompt_n / (t.prompt_ms / 1e3) : 0.0;
  // The first token comes with the prompt pass; decode speed counts the tokens after it.
  int decode_n = std::max(0, t.predicted_n - 1);
  double decode_tps = t.predicted_ms > 0 ? decode_n / (t.predicted_ms / 1e3) : 0.0;
  std::string line = fmt::format("prompt: {} tokens, {:.1f} tok/s | decode: {} tokens, {:.1f} tok/s", t.prompt_n,
                                 prompt_tps, t.predicted_n, decode_tps);
  if (!t.drafter.empty()) {
    line += " | draft acceptance " + format_acceptance(t.speculative.accepted, t.speculative.draft_tokens);
    line += fmt::format(" | {} tokens/step ({})", fmt::format("{:.2f}", t.speculative.mean_accepted_length()), t.drafter);
  }
  if (t.synthetic_accept >= 0) line += fmt::format(" | SYNTHETIC acceptance {:.2f} (benchmark only)", t.synthetic_accept);
  std::printf("%s\n", line.c_str());
  if (!t.drafter.empty() && t.speculative.draft_tokens > 0) {
    std::printf("acceptance per position: %s | drafting %.0f of %.0f ms\n",
                format_acceptance_per_pos(t.speculative.drafted_per_pos, t.speculative.accepted_per_pos).c_str(),
                t.draft_ms, t.predicted_ms);
  }
  // Steps per depth (drafts in the step, 0: a plain row): what `auto` chose.
  if (!t.draft_depths.empty()) std::printf("depths: %s\n", format_depths(t.draft_depths).c_str());
  if (f.compare_plain && best_plain_tps > 0) {
    std::printf("plain decoding of the same request: %d tokens, %.1f tok/s | speculative %.1f tok/s = %.2fx plain "
                "(fastest of %d alternating runs each; %s)\n",
                best_plain.predicted_n, best_plain_tps, best_tps, best_tps / best_plain_tps, std::max(1, f.repeat),
                same_tokens ? "the same tokens" : "different tokens (sampling draws differ)");
  }
  if (compiled) {
    // Over every run: the first run walks the trie for each new state, later ones reuse the masks.
    auto c = compiled->stats();
    std::printf("constraint: %ld masks applied, %.3f ms each with %ld trie walks of %.2f ms each (all runs) | "
                "best run's decode step %.2f ms\n",
                c.masks_applied, c.masks_applied ? c.apply_seconds * 1e3 / double(c.masks_applied) : 0.0, c.masks_built,
                c.masks_built ? c.build_seconds * 1e3 / double(c.masks_built) : 0.0,
                t.predicted_n > 1 ? t.predicted_ms / (t.predicted_n - 1) : 0.0);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& root) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* app = root.add_subcommand("generate", "Generate tokens for one prompt (prints text/ids and timings)");
  add_engine_flags(*app, f->engine);
  app->add_option("--prompt-tokens", f->prompt_tokens, "Prompt as comma-separated token ids (prints ids)");
  app->add_option("-p,--prompt", f->prompt, "Prompt text (tokenized with the model's tokenizer.json)");
  app->add_option("--chat", f->chat, "A user message, rendered with the model's chat template");
  app->add_option("-n,--n-predict", f->n, "Tokens to generate")->capture_default_str()->check(integer_in(0, 1 << 24));
  app->add_option("--temp,--temperature", f->sampling.temperature, "Temperature (0: greedy)")
      ->capture_default_str()
      ->check(finite_in(0, 100));
  app->add_option("--top-k", f->sampling.top_k, "Top-k (0: off)")->capture_default_str()->check(integer_in(0, 1 << 30));
  app->add_option("--top-p", f->sampling.top_p, "Top-p (nucleus)")->capture_default_str()->check(finite_in(0, 1));
  app->add_option("--min-p", f->sampling.min_p, "Min-p")->capture_default_str()->check(finite_in(0, 1));
  app->add_option("--repeat-penalty", f->sampling.repetition_penalty, "Repetition penalty (1: off)")
      ->check(finite_in(1e-3, 100));
  app->add_option("--presence-penalty", f->sampling.presence_penalty, "Presence penalty")->check(finite_in(-2, 2));
  app->add_option("--frequency-penalty", f->sampling.frequency_penalty, "Frequency penalty")->check(finite_in(-2, 2));
  app->add_option("--seed", f->sampling.seed, "Sampling seed (same seed, same output)")
      ->each([f](const std::string&) { f->seed_given = true; });
  app->add_flag("--ids", f->ids, "Print token ids instead of text");
  app->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-sequence tokens");
  app->add_flag("-q,--quiet", f->quiet, "Do not echo the prompt text");
  app->add_flag("-v,--verbose", f->verbose, "Log engine events (load, per-request line) to stderr");
  app->add_option("--repeat", f->repeat, "Run the request this many times; report the fastest decode")
      ->check(integer_in(1, 1000));
  app->add_flag("--compare-plain", f->compare_plain,
                "After each run, decode the same request without drafting on the same engine and report both speeds");
  app->add_option("--json-schema", f->json_schema_file, "Constrain the output to JSON valid under this JSON Schema file");
  app->add_option("--grammar", f->grammar_file, "Constrain the output to this GBNF grammar file");
  return {app, [f]() { return run_generate(*f); }};
}

}  // namespace nextn
