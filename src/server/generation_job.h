// server/generation_job.h — a checked request turned into the generation to run: the
// prompt tokens (chat messages rendered with the model's chat template, or the
// completion prompt as text or token ids), the prompt checks, the token limit and the
// request's KV storage fitted to the model; plus what the answer needs to know about
// the request (ResponsePlan). No HTTP here: server.cc calls it, the answer writers
// (responses.cc, sse_writer.cc) read the plan.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "server/backend.h"
#include "server/generation.h"
#include "server/request.h"

namespace nextn::server {

// How the answer to a generation request is shaped.
struct ResponsePlan {
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  bool token_sources = false;       // streamed chunks carry choices[0].nextn.tokens
  int n_prompt = 0;                 // prompt tokens
  std::string echo;                 // completions with echo: the prompt text
  bool opens_think = false;         // the rendered prompt ends inside a <think> block
  nlohmann::ordered_json tools;     // chat tools (tool calls are parsed from the output)
};

struct PreparedGeneration {
  GenerationJob job;
  ResponsePlan plan;
};

// The prompt text a chat request renders to, within `limits`; a template error (a limit
// reached included) is a 400 naming messages.
std::string render_chat_prompt(const Backend& backend, const ParsedRequest& request, bool add_generation_prompt,
                               const jinja::RenderLimits& limits);

// Checks the request against the model (name, prompt, KV group) and builds the job;
// problems are ApiErrors naming the field.
PreparedGeneration prepare_generation(const Backend& backend, ParsedRequest request, int default_max_tokens,
                                      const jinja::RenderLimits& template_limits);

}  // namespace nextn::server
