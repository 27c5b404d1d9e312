// cli/perf_model.cc — `nextn perf --model`: loads the model and times decode, prefill and
// verify after a short prompt, then decode after each --contexts length (the KV rows of
// those contexts are written straight into the caches, not prefilled).
#include "cli/perf_model.h"

#include <algorithm>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "io/checkpoint.h"
#include "model/model.h"
#include "state/sequence_state.h"
#include "util/error.h"
#include "util/timer.h"

namespace nextn {

namespace {

std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, std::max(1, vocab) - 1);
  std::vector<int32_t> tokens(n);
  for (auto& t : tokens) t = dist(rng);
  return tokens;
}

// One forward appending `tokens` to each state in `states` (a batch of sequences), logits
// for every row when all_logits (a verify), else for each sequence's last row.
double timed_forward(Model& model, std::span<SequenceState* const> states, const std::vector<int32_t>& tokens,
                     bool all_logits, ForwardResult& result) {
  std::vector<SequenceRows> batch(states.size());
  for (size_t b = 0; b < states.size(); ++b) {
    SequenceRows& rows = batch[b];
    rows.state = states[b];
    rows.snapshots = all_logits;  // a verify keeps every row's recurrent state (rolled back after)
    rows.tokens = tokens;
    if (all_logits) {
      for (size_t i = 0; i < tokens.size(); ++i) rows.logit_rows.push_back(static_cast<int>(i));
    } else {
      rows.logit_rows.push_back(static_cast<int>(tokens.size()) - 1);
    }
  }
  Stopwatch watch;
  model.forward(batch, result);
  return watch.seconds();
}

double timed_forward(Model& model, SequenceState& kv, const std::vector<int32_t>& tokens, bool all_logits,
                     ForwardResult& result) {
  SequenceState* one = &kv;
  return timed_forward(model, std::span<SequenceState* const>(&one, 1), tokens, all_logits, result);
}

// Gives `state` n more positions of random keys and values through the forward protocol
// of SequenceState, without running the model: a 32K-token prefill would take many
// minutes, and a decode step's cost does not depend on what the keys and values hold.
// Rows go in pieces no larger than a forward may add (sliding-window rings); recurrent
// layers keep their fixed-size state, whose cost does not depend on the length. The
// keys and values are windows at random offsets into one pool of normal samples
// (drawing 10^9 fresh samples for a long context would take longer than the decode).
void fill_context(SequenceState& state, int n, uint32_t seed) {
  struct Slot {
    AttentionSlot slot;
    int width;  // floats per row: kv_heads * head_dim
  };
  std::vector<Slot> slots;
  int widest = 1;
  for (int layer = 0; layer < state.num_layers(); ++layer) {
    if (!state.has_attention(layer)) continue;
    const AttentionSlot slot = state.attention(layer);
    if (!slot.owns) continue;  // reads another layer's rows
    const KvShape& shape = slot.cache->shape();
    slots.push_back({slot, shape.n_kv_heads * shape.head_dim});
    widest = std::max(widest, slots.back().width);
  }
  const int piece_max = std::max(1, std::min(state.max_rows_per_forward(), 1024));
  constexpr size_t kSlack = 1 << 16;  // room for the random offsets
  std::vector<float> pool(size_t(piece_max) * widest + kSlack);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : pool) x = normal(rng);
  for (int done = 0; done < n;) {
    const int rows = std::min(piece_max, n - done);
    const int pos = state.length();
    state.begin_rows(rows, false);
    for (const Slot& s : slots) {
      const float* k = pool.data() + rng() % kSlack;
      const float* v = pool.data() + rng() % kSlack;
      s.slot.cache->append(s.slot.layer, pos, rows, k, v);
    }
    state.end_rows();
    done += rows;
  }
}

// Decode after `context` positions: the cache filled directly, then f.repeats runs of
// f.decode_steps single-token forwards, each run continuing where the last one ended
// (8 or 32 more positions change nothing measurable at 8K+, and recurrent layers could
// not be rolled back anyway).
ContextPerf measure_context(Model& model, const ModelPerfOptions& f, int context) {
  ContextPerf perf;
  perf.context = context;
  const int capacity = context + 1 + f.repeats * f.decode_steps + 8;
  auto state = model.new_state(capacity, f.kv);
  fill_context(*state, context, 11);
  perf.kv_gb = static_cast<double>(state->attention_bytes()) / 1e9;
  const int vocab = model.config().vocab_size;
  ForwardResult result;
  timed_forward(model, *state, random_tokens(1, vocab, 12), false, result);  // warm-up
  perf.decode_seconds = 1e30;
  for (int rep = 0; rep < f.repeats; ++rep) {
    double total = 0;
    for (int32_t token : random_tokens(f.decode_steps, vocab, 13 + rep))
      total += timed_forward(model, *state, {token}, false, result);
    perf.decode_seconds = std::min(perf.decode_seconds, total / f.decode_steps);
  }
  return perf;
}

}  // namespace

ModelPerf measure_model(const ModelPerfOptions& f) {
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
  const int longest_prefill = *std::max_element(f.prefill.begin(), f.prefill.end());
  auto kv = model->new_state(std::max(longest_prefill, context + f.decode_steps + f.max_k) + 8, f.kv);
  ForwardResult result;
  const int vocab = config.vocab_size;

  // Warm-up (faults in mmap'd pages, sizes buffers).
  timed_forward(*model, *kv, random_tokens(context, vocab, 1), false, result);
  timed_forward(*model, *kv, random_tokens(1, vocab, 2), false, result);
  kv->return_to(0);

  // Prefill: one chunk of each length, the lengths taken in turn each round.
  perf.prefill_seconds.assign(f.prefill.size(), 1e30);
  for (int rep = 0; rep < std::max(1, f.repeats / 2); ++rep)
    for (size_t i = 0; i < f.prefill.size(); ++i) {
      kv->return_to(0);
      const double seconds = timed_forward(*model, *kv, random_tokens(f.prefill[i], vocab, 3), false, result);
      perf.prefill_seconds[i] = std::min(perf.prefill_seconds[i], seconds);
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

  // Verify: one forward over k rows of each of f.sequences sequences with logits for every
  // row, rolled back each time. Rounds visit k = 1..K in turn so every k sees the same
  // machine load.
  perf.verify_seconds.assign(f.max_k, 1e30);
  perf.verify_experts.assign(f.max_k, 0.0);
  std::vector<std::unique_ptr<SequenceState>> others;  // the batch's sequences besides kv
  std::vector<SequenceState*> batch = {kv.get()};
  for (int b = 1; b < f.sequences; ++b) {
    others.push_back(model->new_state(context + f.max_k + 8, f.kv));
    batch.push_back(others.back().get());
  }
  auto prompt_all = [&] {  // each sequence at `context`, able to return there
    for (SequenceState* s : batch) {
      if (s->can_return_to(context)) continue;
      s->return_to(0);
      timed_forward(*model, *s, random_tokens(context, vocab, 4), false, result);
    }
  };
  prompt_all();
  for (int rep = 0; rep < std::max(3, f.repeats); ++rep)
    for (int k = 1; k <= f.max_k; ++k) {
      const auto rows = random_tokens(k, vocab, 100 + k);
      for (SequenceState* s : batch) s->return_to(context);
      const RoutedStats before = model->routed_stats();
      perf.verify_seconds[k - 1] = std::min(perf.verify_seconds[k - 1], timed_forward(*model, batch, rows, true, result));
      perf.verify_experts[k - 1] = std::max(0.0, model->routed_stats().experts_per_forward_since(before));
      if (k == f.max_k && k > 1) {
        Stopwatch restore;
        kv->return_to(context + 1);
        timed_forward(*model, *kv, random_tokens(1, vocab, 6), false, result);
        const double seconds = std::max(0.0, restore.seconds() - perf.decode_seconds);
        perf.restore_seconds = rep == 0 ? seconds : std::min(perf.restore_seconds, seconds);
        prompt_all();  // that decode row ended what recurrent layers can undo
      }
    }
  others.clear();
  kv.reset();  // its rows are not needed by the long contexts below
  for (int n : f.contexts) perf.contexts.push_back(measure_context(*model, f, n));
  return perf;
}

}  // namespace nextn
