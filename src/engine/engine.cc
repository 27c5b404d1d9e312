// engine/engine.cc — the scheduler. One engine thread runs steps; each step:
//  1. admits queued requests into free slots (reusing the slot's cached prompt prefix),
//  2. hands every active sequence to the speculative step (speculative/speculator.h) —
//     a prefill chunk, or a decoding sequence with its last token and the room it has —
//     which plans depths, drafts for the batch, runs ONE batched target forward,
//     verifies, returns each state to its accepted length and commits the drafters,
//  3. emits each sequence's tokens (the first one after its prompt is sampled here).
// Cancellation (callback returning false, cancel(id)) takes effect within a step.
#include "engine/engine.h"

#include "engine/image_row_cache.h"
#include "io/checkpoint.h"
#include "model/mrope.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "speculative/counters.h"
#include "speculative/speculator.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace nextn {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kInvalidRequest: return "invalid_request";
  }
  return "none";
}

const char* token_source_name(TokenSource source) {
  switch (source) {
    case TokenSource::kTarget: return "target";
    case TokenSource::kDraft: return "draft";
    case TokenSource::kCorrection: return "correction";
    case TokenSource::kBonus: return "bonus";
  }
  return "target";
}

PromptProblem find_prompt_problem(std::span<const int32_t> prompt, int n_ctx, int vocab_size) {
  PromptProblem p;
  if (prompt.empty()) {
    p.kind = PromptProblem::Kind::kEmpty;
    return p;
  }
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab_size) {
      p.kind = PromptProblem::Kind::kBadToken;
      p.index = i;
      p.token = prompt[i];
      return p;
    }
  if (int64_t(prompt.size()) >= n_ctx) p.kind = PromptProblem::Kind::kTooLong;
  return p;
}

namespace {

bool same_kv_options(const KvOptions& a, const KvOptions& b) {
  return a.type == b.type && a.group_size == b.group_size && a.compress_after == b.compress_after &&
         a.keep_recent == b.keep_recent;
}

// The prefix-cache key of each prompt row: the token id for text; for a row of an image
// a negative number from the image's pixel hash and the row's index in the image, so
// equal placeholder ids of different pictures never match.
std::vector<int64_t> prompt_keys(const GenerationRequest& req) {
  std::vector<int64_t> keys(req.prompt.begin(), req.prompt.end());
  for (const PromptImage& im : req.images)
    for (int64_t i = 0; i < im.image.n_tokens(); ++i) {
      uint64_t z = im.hash + 0x9e3779b97f4a7c15ull * uint64_t(i + 1);  // splitmix64
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      keys[size_t(im.row + i)] = int64_t(z | (uint64_t(1) << 63));
    }
  return keys;
}

struct Active {
  uint64_t id = 0;
  GenerationRequest req;
  std::vector<int64_t> keys;                      // prompt_keys(req)
  std::vector<ImageRowCache::Rows> image_rows;    // the tower's rows per image [rows, hidden]
  std::vector<int32_t> positions;                 // image prompts: [prompt × 3] (t, h, w)
  int rope_delta = 0;
  std::unique_ptr<Sampler> sampler;
  int prefilled = 0;     // prompt tokens in the sequence state
  bool decoding = false;
  int32_t last = 0;      // emitted token not yet in the KV cache
  int generated = 0;
  Timings timings;
  double t_admit = 0, t_first = 0;
  // Where emitting the current step's tokens got to: its accepted drafts, the token being
  // emitted and whether it reached the caller. A request that ends inside a step (a stop
  // string, the end token, max_tokens) leaves its later accepted drafts out of the
  // answer, and they are taken off its counters: draft_n_accepted then counts exactly
  // the drafted tokens the caller was given.
  int step_accepted = 0, step_index = 0;
  bool step_token_delivered = true;
};

struct Slot {
  int index = 0;
  std::unique_ptr<SequenceState> state;
  KvOptions kv_options;
  std::vector<int64_t> cached;  // what is in state: prompt_keys, then generated tokens
  uint64_t last_used = 0;       // when a request last started here (admission order)
  SequenceSpeculation spec;     // the draft session and this request's speculation record
  std::unique_ptr<Active> active;
};

struct Queued {
  uint64_t id;
  GenerationRequest req;
  std::vector<int64_t> keys;  // prompt_keys(req)
};

}  // namespace

struct Engine::Impl {
  EngineOptions opt;
  std::unique_ptr<Model> model;
  std::unique_ptr<Speculator> speculator;
  std::unique_ptr<vision::VisionEncoder> encoder;  // null: text only
  ImageRowCache image_cache{size_t(256) << 20};    // the encoder's rows of recent pictures
  std::vector<Slot> slots;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Queued> queue;
  std::unordered_set<uint64_t> cancel_requests;
  bool stopping = false;
  uint64_t next_id = 1;
  uint64_t admissions = 0;  // orders the slots by last use
  EngineStats stats;
  std::thread thread;

  std::vector<StepSequence> batch;
  std::vector<Slot*> batch_slots;

  void run();
  void admit();
  bool step();
  void start(Slot& slot, Queued q);
  StepSequence collect(Slot& slot);
  void emit_step(Slot& slot, const StepSequence& q);
  void finish_prefill_chunk(Slot& slot, const StepSequence& q);
  bool emit(Slot& slot, const TokenEvent& provenance, const float* logits_row);
  bool constraint_failed(Slot& slot);
  void finish(Slot& slot, FinishReason reason, const std::string& error = {});
  void update_memory_stats();
};

namespace {
const EngineOptions& checked(const EngineOptions& o) {
  if (o.parallel < 1) fail(ErrorKind::kBadInput, "--parallel must be >= 1, got {}", o.parallel);
  if (o.threads > 0) ThreadPool::set_global_threads(o.threads);
  return o;
}

// The vision encoder: --mmproj's, or the checkpoint's own tower when the language model
// has an image token; null for a text-only model.
std::unique_ptr<vision::VisionEncoder> load_encoder(const EngineOptions& o, const Model& model) {
  const ModelConfig& c = model.config();
  const vision::ImagePlaceholder tokens{c.image_token_id, c.vision_start_token_id, c.vision_end_token_id};
  std::unique_ptr<vision::VisionEncoder> encoder;
  if (!o.mmproj.empty()) {
    encoder = vision::load_vision_encoder(Checkpoint::open(o.mmproj), tokens, o.vision);
    if (!encoder)
      fail(ErrorKind::kUnsupported, "--mmproj {}: no vision tower of a family nextn reads ({})", o.mmproj,
           fmt::join(vision::vision_encoder_families(), ", "));
  } else if (c.image_token_id >= 0) {
    encoder = vision::load_vision_encoder(Checkpoint::open(model.dir()), tokens, o.vision);
  }
  if (encoder && encoder->placeholder().token < 0)
    fail(ErrorKind::kBadInput, "{}: the language model has no image token (config.json image_token_id), so the {} "
         "vision encoder cannot be used", model.dir(), encoder->name());
  if (encoder) log_info("vision encoder {} loaded: images in prompts are answered", encoder->name());
  return encoder;
}
}  // namespace

Engine::Engine(const EngineOptions& options) : impl_(std::make_unique<Impl>()) {
  std::unique_ptr<Model> model = Model::load(checked(options).model_dir, options.load);
  auto speculator = std::make_unique<Speculator>(*model, options.speculative, options.parallel);
  start_thread(options, std::move(model), std::move(speculator));
}

Engine::Engine(const EngineOptions& options, std::unique_ptr<Model> model, std::unique_ptr<Speculator> speculator)
    : impl_(std::make_unique<Impl>()) {
  start_thread(checked(options), std::move(model), std::move(speculator));
}

void Engine::start_thread(const EngineOptions& options, std::unique_ptr<Model> model,
                          std::unique_ptr<Speculator> speculator) {
  Impl& s = *impl_;
  s.opt = options;
  s.model = std::move(model);
  s.speculator = std::move(speculator);
  s.encoder = load_encoder(s.opt, *s.model);
  s.slots.resize(size_t(s.opt.parallel));
  for (int i = 0; i < s.opt.parallel; ++i) s.slots[size_t(i)].index = i;
  if (const Drafter* drafter = s.speculator->drafter())
    log_info("speculative decoding: drafter {} with {} draft tokens per step{}{}", drafter->name(),
             s.opt.speculative.num_draft_tokens,
             s.speculator->adaptive() ? " at most, the depth per sequence and step chosen by measured costs" : "",
             s.opt.speculative.synthetic_accept >= 0
                 ? fmt::format(" — SYNTHETIC acceptance {:.2f} (benchmark only)", s.opt.speculative.synthetic_accept)
                 : "");
  s.thread = std::thread([this] { impl_->run(); });
}

Engine::~Engine() { shutdown(); }

const Model& Engine::model() const { return *impl_->model; }
const vision::VisionEncoder* Engine::vision_encoder() const { return impl_->encoder.get(); }
const EngineOptions& Engine::options() const { return impl_->opt; }

uint64_t Engine::submit(GenerationRequest request) {
  Impl& s = *impl_;
  int vocab = s.model->config().vocab_size;
  switch (PromptProblem p = find_prompt_problem(request.prompt, s.opt.ctx_size, vocab); p.kind) {
    case PromptProblem::Kind::kNone: break;
    case PromptProblem::Kind::kEmpty: fail(ErrorKind::kBadInput, "prompt: empty (at least one token is needed)");
    case PromptProblem::Kind::kBadToken:
      fail(ErrorKind::kBadInput, "prompt: token id {} outside the vocabulary (0..{})", p.token, vocab - 1);
    case PromptProblem::Kind::kTooLong:
      fail(ErrorKind::kBadInput, "prompt: {} tokens do not fit the context of {} tokens", request.prompt.size(),
           s.opt.ctx_size);
  }
  if (request.max_tokens < 0) fail(ErrorKind::kBadInput, "max_tokens: must be >= 0, got {}", request.max_tokens);
  if (!request.images.empty() && !s.encoder)
    fail(ErrorKind::kBadInput, "prompt: images given, but the model has no vision encoder");
  int next_row = 0;
  for (const PromptImage& im : request.images) {
    const int64_t n = im.image.n_tokens();
    if (im.row < next_row || n <= 0 || im.row + n > int64_t(request.prompt.size()))
      fail(ErrorKind::kBadInput, "prompt: image rows [{}, {}) out of order or outside the prompt", im.row, im.row + n);
    const int32_t token = s.encoder->placeholder().token;
    for (int64_t r = im.row; r < im.row + n; ++r)
      if (request.prompt[size_t(r)] != token)
        fail(ErrorKind::kBadInput, "prompt: row {} of an image holds token {}, not the image token {}", r,
             request.prompt[size_t(r)], token);
    next_row = int(im.row + n);
  }
  std::vector<int64_t> keys = prompt_keys(request);
  std::lock_guard lock(s.mu);
  if (s.stopping) fail(ErrorKind::kResource, "engine is shutting down");
  size_t busy = 0;
  for (auto& slot : s.slots) busy += slot.active ? 1 : 0;
  if (s.queue.size() >= size_t(s.opt.queue_size) + (s.slots.size() - std::min(busy, s.slots.size())))
    fail(ErrorKind::kResource, "request queue is full ({} waiting)", s.queue.size());
  uint64_t id = s.next_id++;
  s.queue.push_back({id, std::move(request), std::move(keys)});
  s.stats.requests_total += 1;
  s.stats.requests_queued = s.queue.size();
  s.cv.notify_all();
  return id;
}

void Engine::cancel(uint64_t id) {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  s.cancel_requests.insert(id);
  s.cv.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

void Engine::shutdown() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mu);
    if (s.stopping && !s.thread.joinable()) return;
    s.stopping = true;
    s.cv.notify_all();
  }
  if (s.thread.joinable()) s.thread.join();
}

void Engine::Impl::run() {
  while (true) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] {
        if (stopping || !queue.empty()) return true;
        for (auto& slot : slots)
          if (slot.active) return true;
        return false;
      });
      if (stopping) break;
    }
    try {
      admit();
      step();
    } catch (const std::exception& e) {
      log_error("engine step failed: {}", e.what());
      for (auto& slot : slots)
        if (slot.active) {
          finish(slot, FinishReason::kError, e.what());
          slot.state.reset();  // state unknown: start over
          slot.cached.clear();
          speculator->reset(slot.spec);
        }
    }
  }
  // Shutdown: cancel everything still queued or running.
  std::deque<Queued> left;
  {
    std::lock_guard lock(mu);
    left.swap(queue);
    stats.requests_queued = 0;
  }
  for (auto& q : left)
    if (q.req.on_done) q.req.on_done(FinishReason::kCancelled, Timings{}, "engine shutting down");
  for (auto& slot : slots)
    if (slot.active) finish(slot, FinishReason::kCancelled, "engine shutting down");
}

void Engine::Impl::admit() {
  while (true) {
    Queued q;
    Slot* target = nullptr;
    {
      std::lock_guard lock(mu);
      if (queue.empty()) return;
      // Among free slots: the one whose cache this prompt reuses with gain, counting what
      // taking it throws away (gain = tokens reused - cached tokens lost); else an empty
      // slot; else the least recently used one. A slot whose cache only shares a beginning
      // with the prompt (a common system prompt) holds another conversation whose next turn
      // would lose it, and on hybrid models that beginning cannot be reused at all
      // (longest_returnable); so a new conversation leaves the others' slots alone and the
      // next turn of a conversation finds its own (what a balancer's prefix affinity
      // relies on).
      const auto& prompt = queue.front().keys;
      long best_gain = 0;
      for (auto& slot : slots) {
        if (slot.active) continue;
        size_t c = 0;
        while (c < slot.cached.size() && c < prompt.size() && slot.cached[c] == prompt[c]) ++c;
        long reused = 0;
        if (c > 0 && slot.state) reused = slot.state->longest_returnable(int(std::min(c, prompt.size() - 1)));
        long gain = std::max(0L, 2 * reused - long(slot.cached.size()));
        bool better = !target || gain > best_gain;
        if (!better && gain == best_gain) {
          if (slot.cached.empty() != target->cached.empty()) better = slot.cached.empty();
          else better = slot.last_used < target->last_used;
        }
        if (better) {
          target = &slot;
          best_gain = gain;
        }
      }
      if (!target) return;
      q = std::move(queue.front());
      queue.pop_front();
      stats.requests_queued = queue.size();
      if (cancel_requests.erase(q.id)) {
        if (q.req.on_done) q.req.on_done(FinishReason::kCancelled, Timings{}, "");
        continue;
      }
    }
    start(*target, std::move(q));
  }
}

void Engine::Impl::start(Slot& slot, Queued q) {
  slot.last_used = ++admissions;
  auto a = std::make_unique<Active>();
  a->id = q.id;
  a->req = std::move(q.req);
  a->keys = std::move(q.keys);
  a->t_admit = now_seconds();
  if (!a->req.images.empty()) {  // the tower's rows, and M-RoPE positions where the model has them
    try {
      std::vector<ImageRows> places;
      Stopwatch watch;
      const size_t H = size_t(model->config().hidden_size);
      for (const PromptImage& im : a->req.images) {
        ImageRowCache::Rows rows = image_cache.find(im.hash, size_t(im.image.n_tokens()) * H);
        a->timings.image_cached_n += rows ? 1 : 0;
        if (!rows) {
          rows = std::make_shared<const std::vector<float>>(encoder->encode(im.image));
          image_cache.insert(im.hash, rows);
        }
        a->image_rows.push_back(std::move(rows));
        places.push_back({im.row, im.image.tokens_h, im.image.tokens_w});
      }
      a->timings.image_n = int(a->req.images.size());
      a->timings.image_ms = watch.seconds() * 1e3;
      if (!model->config().mrope_axes.empty())
        a->rope_delta = mrope_positions(int(a->req.prompt.size()), places, a->positions);
    } catch (const std::exception& e) {
      log_error("vision tower failed: {}", e.what());
      if (a->req.on_done) a->req.on_done(FinishReason::kError, Timings{}, e.what());
      return;
    }
  }
  const ModelConfig& config = model->config();
  a->sampler = std::make_unique<Sampler>(a->req.sampling, config.vocab_size, a->req.prompt);
  a->sampler->set_constraint(a->req.constraint);
  KvOptions kvo = a->req.kv ? *a->req.kv : opt.kv;
  if (!slot.state || !same_kv_options(kvo, slot.kv_options)) {
    slot.state = model->new_state(opt.ctx_size, kvo);
    slot.kv_options = kvo;
    slot.cached.clear();
  }
  // Drafting for this request?
  speculator->start(slot.spec, a->req.speculative ? a->req.num_draft_tokens : 0, opt.ctx_size, kvo);
  if (slot.spec.limit > 0) {
    a->timings.drafter = speculator->drafter()->name();
    if (opt.speculative.synthetic_accept >= 0) a->timings.synthetic_accept = opt.speculative.synthetic_accept;
  }
  // Prefix cache: keep the common prefix, but recompute at least the last prompt row,
  // and only at a length the state can return to (recurrent layers: the whole cached
  // sequence, e.g. the next turn of a chat, or nothing).
  const auto& prompt = a->keys;
  size_t c = 0;
  while (c < slot.cached.size() && c < prompt.size() && slot.cached[c] == prompt[c]) ++c;
  int keep = speculator->reusable_prefix(slot.spec, std::min<int>(int(c), int(prompt.size()) - 1));
  keep = slot.state->longest_returnable(std::max(keep, 0));
  // An image that sees itself is prefilled whole: the kept prefix never ends inside one.
  for (bool moved = config.image_bidirectional; moved;) {
    moved = false;
    for (const PromptImage& im : a->req.images)
      if (keep > im.row && keep < im.row + int(im.image.n_tokens())) {
        keep = slot.state->longest_returnable(im.row);
        moved = true;
      }
  }
  slot.state->return_to(keep);
  slot.cached.resize(size_t(keep));
  speculator->return_to(slot.spec, keep);
  a->prefilled = keep;
  a->timings.cache_n = keep;
  a->timings.kv_type = kv_type_name(slot.kv_options.type);
  {
    std::lock_guard lock(mu);
    stats.requests_active += 1;
  }
  slot.active = std::move(a);
  if (slot.active->req.max_tokens == 0) finish(slot, FinishReason::kLength);
  else if (slot.active->req.constraint && slot.active->req.constraint->complete(0)) finish(slot, FinishReason::kStop);
}

// The slot's part of this step: its next prompt chunk, or its last token and the most
// drafts the step may carry (never past max_tokens, since a step emits up to k + 1
// tokens, nor past the context).
StepSequence Engine::Impl::collect(Slot& slot) {
  Active& a = *slot.active;
  StepSequence q;
  q.state = slot.state.get();
  q.spec = &slot.spec;
  q.sampler = a.sampler.get();
  if (!a.decoding) {
    const int n_prompt = int(a.req.prompt.size());
    int n = std::min(opt.prefill_size, n_prompt - a.prefilled);
    if (model->config().image_bidirectional)  // an image that sees itself stays in one chunk
      for (const PromptImage& im : a.req.images) {
        const int end = im.row + int(im.image.n_tokens());
        if (im.row < a.prefilled + n && end > a.prefilled + n)
          n = im.row > a.prefilled ? im.row - a.prefilled : end - a.prefilled;
      }
    q.prefill = std::span<const int32_t>(a.req.prompt.data() + a.prefilled, size_t(n));
    q.last_chunk = a.prefilled + n == n_prompt;
    if (!a.positions.empty())
      q.positions = std::span<const int32_t>(a.positions.data() + size_t(a.prefilled) * 3, size_t(n) * 3);
    const size_t H = size_t(model->config().hidden_size);
    for (size_t i = 0; i < a.req.images.size(); ++i) {  // the part of each image inside the chunk
      const PromptImage& im = a.req.images[i];
      const int lo = std::max(im.row, a.prefilled), hi = std::min(im.row + int(im.image.n_tokens()), a.prefilled + n);
      if (lo < hi) q.embeddings.push_back({lo - a.prefilled, hi - lo, a.image_rows[i]->data() + size_t(lo - im.row) * H});
    }
  } else {
    q.position_offset = a.rope_delta;
    q.last = a.last;
    q.room = std::max(0, std::min(a.req.max_tokens - a.generated - 1, opt.ctx_size - slot.state->length() - 2));
  }
  return q;
}

bool Engine::Impl::step() {
  // Cancellations requested from other threads.
  {
    std::unordered_set<uint64_t> cancels;
    {
      std::lock_guard lock(mu);
      for (auto& slot : slots)
        if (slot.active && cancel_requests.erase(slot.active->id)) cancels.insert(slot.active->id);
    }
    for (auto& slot : slots)
      if (slot.active && cancels.count(slot.active->id)) finish(slot, FinishReason::kCancelled);
  }
  batch.clear();
  batch_slots.clear();
  for (auto& slot : slots)
    if (slot.active) {
      batch.push_back(collect(slot));
      batch_slots.push_back(&slot);
    }
  if (batch.empty()) return false;
  StepReport report = speculator->step(batch);
  {
    std::lock_guard lock(mu);
    stats.speculative.add(report.counters);
    if (stats.draft_depths.size() < report.depths.size()) stats.draft_depths.resize(report.depths.size(), 0);
    for (size_t k = 0; k < report.depths.size(); ++k) stats.draft_depths[k] += report.depths[k];
  }
  for (size_t i = 0; i < batch.size(); ++i) emit_step(*batch_slots[i], batch[i]);
  update_memory_stats();
  return true;
}

void Engine::Impl::update_memory_stats() {
  std::lock_guard lock(mu);
  size_t used = 0, f16 = 0, recurrent = 0, snapshots = 0, per_sequence = 0;
  uint64_t active_tokens = 0;
  for (auto& slot : slots)
    if (slot.state) {
      if (slot.active) active_tokens += uint64_t(std::max(0, slot.state->length()));
      const SequenceState& st = *slot.state;
      size_t kv = st.attention_bytes() + (slot.spec.session ? slot.spec.session->kv_bytes() : 0);
      used += kv;
      f16 += st.attention_f16_equivalent_bytes();
      recurrent += st.recurrent_bytes();
      snapshots += st.snapshot_bytes();
      per_sequence = std::max(per_sequence, kv + st.recurrent_bytes() + st.snapshot_bytes());
    }
  stats.kv_bytes_used = used;
  stats.kv_bytes_f16_equivalent = f16;
  stats.recurrent_bytes = recurrent;
  stats.snapshot_bytes = snapshots;
  stats.state_bytes_per_sequence_max = per_sequence;
  stats.kv_tokens_active = active_tokens;
}

// Emits what the step made of the slot's sequence: the tokens of a decode step, with how
// each came about; after the last prompt chunk, the first token.
void Engine::Impl::emit_step(Slot& slot, const StepSequence& q) {
  Active& a = *slot.active;
  if (!q.decoding()) {
    finish_prefill_chunk(slot, q);
    return;
  }
  const int vocab = model->config().vocab_size;
  const StepTokens& step = q.tokens;
  // The state holds [last, d1..da] now.
  slot.cached.push_back(a.last);
  slot.cached.insert(slot.cached.end(), step.tokens.begin(), step.tokens.begin() + step.accepted);
  const int k = q.drafts;
  for (size_t i = 0; i < step.tokens.size(); ++i) {
    TokenEvent ev;
    ev.token = step.tokens[i];
    ev.position = int(i) + 1;
    ev.drafts = k;
    ev.source = int(i) < step.accepted ? TokenSource::kDraft
                : k == 0              ? TokenSource::kTarget
                : step.accepted == k  ? TokenSource::kBonus
                                      : TokenSource::kCorrection;
    a.step_accepted = step.accepted;
    a.step_index = int(i);
    if (!emit(slot, ev, q.logits + i * size_t(vocab))) return;
  }
}

// A prefill chunk is in the KV cache: the drafter sees it too; after the last chunk the
// first token comes from the last prompt row.
void Engine::Impl::finish_prefill_chunk(Slot& slot, const StepSequence& q) {
  Active& a = *slot.active;
  slot.cached.insert(slot.cached.end(), a.keys.begin() + a.prefilled, a.keys.begin() + a.prefilled + q.prefill.size());
  a.prefilled += int(q.prefill.size());
  if (!q.last_chunk) return;
  const float* logits = q.logits;
  a.decoding = true;
  a.step_accepted = 0;
  a.t_first = now_seconds();
  a.timings.prompt_n = int(a.req.prompt.size()) - a.timings.cache_n;
  a.timings.prompt_ms = (a.t_first - a.t_admit) * 1e3;
  int32_t tok = a.sampler->sample(logits);
  a.sampler->accept(tok);
  TokenEvent ev;
  ev.token = tok;
  emit(slot, ev, logits);
}

// Emits one token (`provenance`: the token and how its step made it); returns false
// when the request finished.
bool Engine::Impl::emit(Slot& slot, const TokenEvent& provenance, const float* logits_row) {
  Active& a = *slot.active;
  a.step_token_delivered = false;
  if (constraint_failed(slot)) return false;
  const int32_t token = provenance.token;
  a.last = token;
  for (int32_t stop : a.req.stop_tokens)
    if (token == stop) {
      a.generated += 1;
      finish(slot, FinishReason::kStop);
      return false;
    }
  a.generated += 1;
  TokenReply reply = true;
  if (a.req.on_token) {
    TokenEvent ev = provenance;
    if (a.req.logprobs || a.req.top_logprobs > 0) {
      TokenLogprobs lp = compute_logprobs(logits_row, model->config().vocab_size, token, a.req.top_logprobs);
      ev.logprob = lp.logprob;
      for (auto& [t, l] : lp.top) ev.top.push_back({t, l});
    }
    reply = a.req.on_token(ev);
  }
  a.step_token_delivered = true;
  if (!reply) {
    finish(slot, reply.finish());
    return false;
  }
  // The sampler's constraint has seen every token of the step (verification accepts them
  // all); the one just emitted is token number `generated`.
  if (constraint_failed(slot)) return false;
  if (a.req.constraint && a.req.constraint->complete(a.generated)) {
    finish(slot, FinishReason::kStop);
    return false;
  }
  if (a.generated >= a.req.max_tokens || slot.state->length() + 1 >= opt.ctx_size) {
    finish(slot, FinishReason::kLength);
    return false;
  }
  return true;
}

// The request's constraint passed one of its limits: the request ends with its message.
bool Engine::Impl::constraint_failed(Slot& slot) {
  const Constraint* c = slot.active->req.constraint.get();
  std::string why = c ? c->failure() : std::string();
  if (why.empty()) return false;
  finish(slot, FinishReason::kInvalidRequest, why);
  return true;
}

void Engine::Impl::finish(Slot& slot, FinishReason reason, const std::string& error) {
  std::unique_ptr<Active> a = std::move(slot.active);
  speculator->finish(slot.spec, int(a->req.prompt.size()));
  double t_end = now_seconds();
  Timings& t = a->timings;
  t.speculative = slot.spec.counters;
  for (int p = a->step_index + (a->step_token_delivered ? 1 : 0); p < a->step_accepted; ++p) {
    t.speculative.accepted -= 1;  // accepted, but past where the answer ended
    if (size_t(p) < t.speculative.accepted_per_pos.size()) t.speculative.accepted_per_pos[size_t(p)] -= 1;
  }
  t.draft_depths = slot.spec.depths;
  t.draft_ms = slot.spec.draft_seconds * 1e3;
  if (a->decoding) {
    t.predicted_n = a->generated;
    t.predicted_ms = (t_end - a->t_first) * 1e3;
  } else {
    t.prompt_ms = (t_end - a->t_admit) * 1e3;
  }
  {
    std::lock_guard lock(mu);
    stats.requests_active -= 1;
    cancel_requests.erase(a->id);
    stats.prompt_tokens_total += uint64_t(t.prompt_n);
    stats.generated_tokens_total += uint64_t(a->generated);
    stats.prompt_seconds_total += t.prompt_ms / 1e3;
    stats.decode_seconds_total += t.predicted_ms / 1e3;
    uint64_t held = slot.state ? uint64_t(std::max(0, slot.state->length())) : 0;
    stats.kv_tokens_active -= std::min(stats.kv_tokens_active, held);  // no longer busy; the next step recounts
  }
  std::string line = fmt::format(
      "slot done: id {} | slot {} | {} | prompt_n={} cache_n={} {:.1f} t/s | gen_tokens={} {:.1f} t/s", a->id,
      slot.index, finish_reason_name(reason), t.prompt_n, t.cache_n,
      t.prompt_ms > 0 ? t.prompt_n / (t.prompt_ms / 1e3) : 0.0, a->generated,
      t.predicted_ms > 0 ? t.predicted_n / (t.predicted_ms / 1e3) : 0.0);
  if (t.speculative.draft_tokens > 0) {
    if (t.synthetic_accept >= 0) line += fmt::format(" | SYNTHETIC_ACCEPT={:.2f}", t.synthetic_accept);
    line += " | MTP_ACCEPTED=" + format_acceptance(t.speculative.accepted, t.speculative.draft_tokens);
    for (const auto& d : t.speculative.by_drafter)
      line += fmt::format(" {}={}", d.name, format_acceptance(d.accepted, d.draft_tokens));
  }
  if (!t.draft_depths.empty()) line += " | DEPTHS=" + format_depths(t.draft_depths);
  log_info("{}", line);
  if (a->req.on_done) a->req.on_done(reason, t, error);
}

}  // namespace nextn
