// server/generation_job.cc — request → generation job (see generation_job.h).
#include "server/generation_job.h"

#include <algorithm>

#include <fmt/format.h>

#include "grammar/grammar_constraint.h"
#include "server/api_error.h"

namespace nextn::server {

namespace {

std::string basename_of(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool model_matches(const std::string& m, const ModelInfo& info) {
  return m.empty() || m == info.id || m == info.path || m == basename_of(info.path);
}

// The prompt opened a <think> block that the model continues (Qwen3.5/DeepSeek-R1 templates).
bool prompt_opens_think(const std::string& rendered) {
  size_t e = rendered.size();
  while (e > 0 && (rendered[e - 1] == '\n' || rendered[e - 1] == ' ' || rendered[e - 1] == '\r')) --e;
  return e >= 7 && rendered.compare(e - 7, 7, "<think>") == 0;
}

// The engine's prompt rules (find_prompt_problem), as errors naming the request field.
void check_prompt(const std::vector<int32_t>& prompt, const ModelInfo& info, bool chat) {
  PromptProblem p = find_prompt_problem(prompt, info.n_ctx, info.vocab_size);
  switch (p.kind) {
    case PromptProblem::Kind::kNone: return;
    case PromptProblem::Kind::kEmpty: bad_field(chat ? "messages" : "prompt", "the prompt is empty");
    case PromptProblem::Kind::kBadToken:
      bad_field(fmt::format("prompt[{}]", p.index),
                fmt::format("token id {} is outside the vocabulary ({})", p.token, info.vocab_size));
    case PromptProblem::Kind::kTooLong: throw context_exceeded(int(prompt.size()), info.n_ctx);
  }
}

// logit_bias keys are token ids of this model's vocabulary (request.cc checks their form).
void check_logit_bias(const SamplingParams& s, const ModelInfo& info) {
  for (auto [t, bias] : s.logit_bias)
    if (t >= info.vocab_size)
      bad_field("logit_bias." + std::to_string(t), fmt::format("token id {} is outside the vocabulary ({})", t, info.vocab_size));
}

}  // namespace

std::string render_chat_prompt(const Backend& backend, const ParsedRequest& request, bool add_generation_prompt,
                               const jinja::RenderLimits& limits) {
  try {
    return backend.apply_chat_template(request.messages, request.tools, add_generation_prompt,
                                       request.template_kwargs, limits);
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error", std::string("chat template: ") + e.what(), "messages",
                   "template_error");
  }
}

namespace {

// FNV-1a 64 over an image's size and RGB: the prefix cache's key for its rows (equal
// pixels from different files hit; another picture never does).
uint64_t pixel_hash(const vision::DecodedImage& image) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  };
  const int32_t dims[2] = {image.width, image.height};
  mix(reinterpret_cast<const uint8_t*>(dims), sizeof dims);
  mix(image.rgb.data(), image.rgb.size());
  return h;
}

// Each image's one placeholder token in the rendered prompt becomes its full run —
// [begin] token × n_tokens [end], as the encoder says — in order; the images are
// processed here (resize, patches) and their tower runs in the engine.
std::vector<PromptImage> expand_images(std::vector<int32_t>& prompt, const ParsedRequest& pr, const ModelInfo& info) {
  std::vector<PromptImage> out;
  if (pr.images.empty()) return out;
  if (!info.vision)  // the server answers first, naming the checkpoint (server.cc require_vision_encoder)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("model '{}' has no vision encoder: it cannot take image input", info.id), "messages",
                   "no_vision_encoder");
  const vision::ImagePlaceholder mark = info.vision->placeholder();
  size_t marks = 0;
  for (int32_t t : prompt) marks += t == mark.token ? 1 : 0;
  if (marks != pr.images.size())
    throw ApiError(400, "invalid_request_error",
                   fmt::format("the chat template wrote {} image placeholders for the request's {} images", marks,
                               pr.images.size()),
                   "messages", "image_placeholders");
  std::vector<int32_t> expanded;
  size_t next = 0;
  for (int32_t t : prompt) {
    if (t != mark.token) {
      expanded.push_back(t);
      continue;
    }
    const ImageInput& in = pr.images[next++];
    PromptImage im;
    try {
      im.image = info.vision->process(in.image);
    } catch (const Error& e) {
      const std::string param = fmt::format("messages[{}].content[{}]", in.message, in.part);
      throw ApiError(400, "invalid_request_error", param + ": " + e.what(), param, "invalid_image");
    }
    im.hash = pixel_hash(in.image);
    if (mark.begin >= 0) expanded.push_back(mark.begin);
    im.row = int(expanded.size());
    expanded.insert(expanded.end(), size_t(im.image.n_tokens()), mark.token);
    if (mark.end >= 0) expanded.push_back(mark.end);
    out.push_back(std::move(im));
  }
  prompt = std::move(expanded);
  return out;
}

}  // namespace

PreparedGeneration prepare_generation(const Backend& backend, ParsedRequest pr, int default_max_tokens,
                                      const jinja::RenderLimits& template_limits) {
  const ModelInfo& info = backend.info();
  if (!model_matches(pr.model, info)) {
    ApiError e = not_found("The model '" + pr.model + "' does not exist (this server serves '" + info.id + "')",
                           "model_not_found");
    e.param = "model";
    throw e;
  }

  // Group-quantized KV: a group the request names must divide head_dim; the default shrinks to fit.
  if (pr.kv && info.head_dim > 0 && info.head_dim % pr.kv->group_size != 0) {
    if (pr.kv_group_size_given)
      bad_field("kv_group_size", fmt::format("must divide the model's head_dim ({})", info.head_dim));
    pr.kv->group_size = group_size_fitting(pr.kv->group_size, info.head_dim);
  }

  PreparedGeneration out;
  ResponsePlan& plan = out.plan;
  std::vector<int32_t> prompt;
  if (pr.chat) {
    std::string rendered = render_chat_prompt(backend, pr, true, template_limits);
    prompt = backend.tokenize(rendered, false, true);
    plan.opens_think = prompt_opens_think(rendered);
    plan.tools = pr.tools;
  } else if (pr.prompt_is_tokens) {
    prompt = pr.prompt_tokens;
  } else {
    prompt = backend.tokenize(pr.prompt_text, true, true);
  }
  std::vector<PromptImage> images = expand_images(prompt, pr, info);
  check_prompt(prompt, info, pr.chat);
  check_logit_bias(pr.sampling, info);
  if (!pr.chat && pr.echo) plan.echo = pr.prompt_is_tokens ? backend.detokenize(prompt) : pr.prompt_text;

  int max_tokens = pr.max_tokens.value_or(default_max_tokens);
  max_tokens = int(std::min<int64_t>(max_tokens, int64_t(info.n_ctx) - int64_t(prompt.size())));

  plan.chat = pr.chat;
  plan.stream = pr.stream;
  plan.include_usage = pr.include_usage;
  plan.logprobs = pr.logprobs;
  plan.token_sources = pr.token_sources && pr.stream;
  plan.n_prompt = int(prompt.size());

  GenerationJob& job = out.job;
  job.request.prompt = std::move(prompt);
  job.request.images = std::move(images);
  job.request.max_tokens = max_tokens;
  job.request.sampling = pr.sampling;
  job.request.logprobs = pr.logprobs;
  job.request.top_logprobs = pr.top_logprobs;
  job.request.speculative = pr.speculative;
  job.request.num_draft_tokens = pr.num_draft_tokens;
  job.request.kv = pr.kv;
  job.stop = pr.stop;
  job.want_token_texts = pr.logprobs;
  job.want_token_sources = plan.token_sources;
  job.ignore_eos = pr.ignore_eos;
  if (pr.structured.grammar) {
    grammar::GrammarCache* cache = backend.grammar_cache();
    if (!cache) bad_field(pr.structured.source, "structured output is not available on this backend");
    // The end-of-turn tokens end the output exactly where the grammar is complete.
    std::vector<int32_t> ends = pr.ignore_eos ? std::vector<int32_t>{} : backend.eos_tokens();
    std::shared_ptr<grammar::CompiledGrammar> compiled;
    try {
      compiled = cache->get(pr.structured.text, pr.structured.grammar, pr.structured.limits);
    } catch (const grammar::GrammarLimitError& e) {
      grammar_limit_error(pr.structured.source, e);
    }
    job.request.constraint = std::make_shared<grammar::GrammarConstraint>(std::move(compiled), ends);
  }
  return out;
}

}  // namespace nextn::server
