// cli/engine_options.cc — see engine_options.h.
#include "cli/engine_options.h"

#include <cstdlib>

#include "cli/flag_checks.h"
#include "speculative/drafter.h"  // assistant_default_draft_tokens
#include "speculative/step.h"     // kMaxDraftsPerStep
#include "util/error.h"

namespace nextn {

namespace {
// `auto` (the default): the planner picks each sequence's depth per step, up to this.
constexpr int kAdaptiveMaxDrafts = 8;

// "N" fixes the drafts per step; "auto" or nothing leaves them to the depth planner, up
// to `bound`.
void resolve_depth(const std::string& flag, const std::string& value, int bound, SpeculativeOptions& o) {
  if (value.empty() || value == "auto") {
    o.adaptive = true;
    o.num_draft_tokens = bound;
    return;
  }
  size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(value, &used);
  } catch (...) {
  }
  if (used != value.size() || n < 0)
    fail(ErrorKind::kBadInput, "{}: expected a number or 'auto', got '{}'", flag, value);
  o.num_draft_tokens = n;
}
}  // namespace

void add_engine_flags(CLI::App& app, EngineFlags& f) {
  EngineOptions& o = f.options;
  app.add_option("-m,--model", o.model_dir, "Hugging Face checkpoint directory (default: the embedded tiny model)");
  app.add_option("-t,--threads", o.threads, "Compute threads (default: physical cores)")->check(integer_in(1, 1024));
  app.add_option("-c,--ctx-size", o.ctx_size, "Context size in tokens per sequence")
      ->capture_default_str()
      ->check(integer_in(16, 1 << 24));
  app.add_option("--prefill-size", o.prefill_size, "Prompt tokens per prefill chunk")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 20));
  app.add_flag("--mtp", f.mtp, "Draft with the MTP layers inside the checkpoint");
  app.add_option("--num-mtp-tokens", f.num_mtp_tokens,
                 "Tokens drafted per step by MTP or the assistant: N fixes it; auto (the default) lets the "
                 "planner choose per sequence and step from measured costs and acceptance, up to 8 (an "
                 "assistant: its num_assistant_tokens)");
  app.add_option("--mtp-assistant-model", o.speculative.assistant_dir, "Checkpoint holding only MTP layers for the target");
  app.add_option("--draft-model", o.speculative.draft_model_dir, "Smaller model with the same tokenizer used as drafter");
  app.add_option("--num-draft-tokens", f.num_draft_tokens,
                 "Tokens drafted per step by --draft-model / ngram: N, or auto (the default)");
  app.add_option("--spec-type", f.spec_type,
                 "Drafter without a model: ngram (prompt lookup) or suffix (suffix decoding over the sequence and "
                 "earlier outputs); beside --mtp, --mtp-assistant-model or --draft-model it takes over where it "
                 "finds a long match");
  app.add_option("--spec-synthetic-accept", o.speculative.synthetic_accept,
                 "Accept each draft with this probability regardless of the target (benchmarking only)")
      ->check(finite_in(0, 1));
  app.add_option("--draft-vocab", o.speculative.draft_vocab,
                 "MTP and DFlash drafts only among the first N token ids (0: all; default: 32768 for vocabularies > 65536)")
      ->check(integer_in(0, 1 << 30));
  app.add_flag("--benchmark-mode", f.benchmark_mode, "Allow benchmark-only options such as --spec-synthetic-accept");
  app.add_flag("--turbo-kv", f.turbo_kv, "TurboQuant KV-cache compression (3-bit, after --turbo-after tokens)");
  app.add_option("--kv-type", f.kv_type, "KV storage: f32, f16, bf16, q8, q4, turbo3, turbo4")->capture_default_str();
  app.add_option("--kv-group-size", o.kv.group_size, "Group size of q8/q4 KV quantization (32, 64 or 128)")
      ->capture_default_str()
      ->check(CLI::IsMember({32, 64, 128}));
  app.add_option("--turbo-after", o.kv.compress_after, "TurboQuant: compress once a sequence passes this many tokens")
      ->capture_default_str()
      ->check(integer_in(0));
  app.add_option("--turbo-keep-recent", o.kv.keep_recent, "TurboQuant: most recent tokens kept in full precision")
      ->capture_default_str()
      ->check(integer_in(0));
  app.add_flag("--mmap-weights", f.mmap_weights, "Serve weights from the memory-mapped file instead of copying them");
  app.add_option("--mmproj", o.mmproj,
                 "llama.cpp's vision projector GGUF (mmproj-*.gguf) for a text GGUF: images in prompts are answered");
  app.add_option("--image-min-tokens", o.vision.min_tokens, "The fewest tokens an image becomes (0: the model's own)")
      ->check(integer_in(0, 1 << 20));
  app.add_option("--image-max-tokens", o.vision.max_tokens, "The most tokens an image becomes (0: the model's own)")
      ->check(integer_in(0, 1 << 20));
}

EngineOptions resolve_engine_options(const EngineFlags& f) {
  EngineOptions o = f.options;
  if (o.model_dir.empty()) {
    const char* env = std::getenv("NEXTN_MODEL");
    o.model_dir = env && *env ? env : NEXTN_DEFAULT_MODEL;
  }
  o.load.copy_weights = !f.mmap_weights;
  o.kv.type = parse_kv_type(f.turbo_kv ? "turbo3" : f.kv_type);

  // One model drafter at most; a --spec-type lookup beside it takes over where it finds a
  // long match (speculative/chain_drafter.cc).
  const int model_drafters = int(f.mtp) + int(!o.speculative.assistant_dir.empty()) +
                             int(!o.speculative.draft_model_dir.empty());
  if (model_drafters > 1) fail(ErrorKind::kBadInput, "choose one of --mtp, --mtp-assistant-model and --draft-model");
  if (!o.speculative.assistant_dir.empty()) {
    o.speculative.mode = "assistant";
  } else if (f.mtp) {
    o.speculative.mode = "mtp";
  } else if (!o.speculative.draft_model_dir.empty()) {
    o.speculative.mode = "draft";
  }
  if (!f.spec_type.empty() && f.spec_type != "ngram" && f.spec_type != "suffix")
    fail(ErrorKind::kBadInput, "--spec-type: unknown drafter '{}' (known: ngram, suffix)", f.spec_type);
  if (!f.spec_type.empty())
    o.speculative.mode = o.speculative.mode == "none" ? f.spec_type : o.speculative.mode + "+" + f.spec_type;
  const std::string base_mode = o.speculative.mode.substr(0, o.speculative.mode.find('+'));
  // Suffix decoding drafts as far as its match reaches (up to 16 tokens) at almost no
  // cost: `auto` may go that deep; the planner still weighs the verify rows.
  const int auto_max = f.spec_type == "suffix" ? kMaxDraftsPerStep : kAdaptiveMaxDrafts;
  if (base_mode == "mtp") {
    resolve_depth("--num-mtp-tokens", f.num_mtp_tokens, auto_max, o.speculative);
  } else if (base_mode == "assistant") {
    // An assistant checkpoint's num_assistant_tokens (Gemma 4: else 4) bounds `auto`.
    resolve_depth("--num-mtp-tokens", f.num_mtp_tokens,
                  assistant_default_draft_tokens(o.speculative.assistant_dir, kAdaptiveMaxDrafts), o.speculative);
  } else if (base_mode == "draft") {
    // A DFlash drafter's block bounds `auto` (block_size − 1 drafts).
    resolve_depth("--num-draft-tokens", f.num_draft_tokens,
                  draft_model_max_drafts(o.speculative.draft_model_dir, auto_max), o.speculative);
  } else {
    resolve_depth("--num-draft-tokens", f.num_draft_tokens, auto_max, o.speculative);
  }
  if (o.speculative.num_draft_tokens < 0 || o.speculative.num_draft_tokens > kMaxDraftsPerStep)
    fail(ErrorKind::kBadInput, "number of draft tokens must be in 0..{}, got {}", kMaxDraftsPerStep,
         o.speculative.num_draft_tokens);
  if (o.speculative.synthetic_accept >= 0 && o.speculative.mode == "none")
    fail(ErrorKind::kBadInput, "--spec-synthetic-accept needs a drafter (--mtp, --draft-model, --spec-type ngram ...)");
  return o;
}

void check_serve_engine_flags(const EngineFlags& f) {
  if (f.options.speculative.synthetic_accept >= 0 && !f.benchmark_mode)
    fail(ErrorKind::kBadInput,
         "--spec-synthetic-accept makes outputs ignore the model; serve accepts it only with --benchmark-mode");
}

}  // namespace nextn
