// cli/engine_options.h — the flags shared by serve, generate and bench that
// configure an Engine (model, threads, context, KV storage, speculative decoding).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "engine/engine.h"

namespace nextn {

struct EngineFlags {
  EngineOptions options;
  bool mtp = false;
  std::string num_mtp_tokens;    // N or "auto"; empty: auto
  std::string num_draft_tokens;  // N or "auto" (--draft-model, ngram); empty: auto
  std::string spec_type;             // "" or "ngram"
  bool turbo_kv = false;
  std::string kv_type = "f16";
  bool benchmark_mode = false;
  bool mmap_weights = false;
};

// Registers the flags on `app`, writing into `flags`.
void add_engine_flags(CLI::App& app, EngineFlags& flags);
// Turns parsed flags into EngineOptions (model default, speculative mode, KV type).
// Throws nextn::Error for inconsistent combinations.
EngineOptions resolve_engine_options(const EngineFlags& flags);
// For `serve`: benchmark-only options (--spec-synthetic-accept) are refused unless
// --benchmark-mode is given. Throws nextn::Error(kBadInput) naming the flag.
void check_serve_engine_flags(const EngineFlags& flags);

}  // namespace nextn
