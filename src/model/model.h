// model/model.h — a loaded decoder-only model and its batched forward pass.
// One Model serves every sequence: a forward call takes rows from one or more
// sequences (prefill chunks, decode rows, speculative verify rows), each sequence
// bringing its own SequenceState (state/sequence_state.h: per layer an attention cache
// or a recurrent state). New rows are appended at state->length(), so positions are
// implicit unless SequenceRows::positions says otherwise; rolling back is state->return_to(n) — for recurrent layers only to the
// lengths a snapshotted forward kept.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/routed_stats.h"
#include "state/sequence_state.h"

namespace nextn {

class Checkpoint;

struct LoadOptions {
  // Copy weights into allocated memory instead of serving them from the mmap
  // (mmap'd pages can be evicted and re-read; docs/performance.md, "mmap'd vs copied weights").
  bool copy_weights = true;
};

// Input rows that come from outside the token embedding: an image's vision-tower rows
// (docs/vision-models.md). They replace the embedded rows [row, row + count) of a SequenceRows
// (after embedding_scale, which they do not get); the tokens there (the image
// placeholders) are still the rows' token ids for everything else.
struct EmbeddingSpan {
  int row = 0;                  // first replaced row, an index into SequenceRows::tokens
  int count = 0;                // rows replaced
  const float* data = nullptr;  // [count, hidden_size], row-major; outlives the forward call
};

// The rows one sequence contributes to a forward call.
struct SequenceRows {
  SequenceState* state = nullptr;        // appended to; sequence index i is state->length() + i
  std::span<const int32_t> tokens;       // new tokens of this sequence
  std::vector<EmbeddingSpan> embeddings;  // replaced input rows, in row order, not overlapping
  // Rotary positions. Empty `positions`: row i is at p = state->length() + i + position_offset
  // on every axis. Otherwise 3 per row, (t, h, w) for M-RoPE (Qwen3.5 over an image:
  // model/mrope.h): [tokens.size() × 3]; a model without M-RoPE rotates by t. Positions
  // only rotate; attention's causal order is the sequence index.
  std::span<const int32_t> positions;
  int position_offset = 0;  // M-RoPE's rope_delta after an image (model/mrope.h); 0 for text
  std::vector<int> logit_rows;           // indices into tokens whose logits are wanted
  std::vector<int> hidden_rows;          // indices into tokens whose final hidden states are wanted
  // Keep what returning to any of these rows takes (a speculative verify): afterwards
  // the state can return to any length inside them.
  bool snapshots = false;
};

struct ForwardResult {
  // Concatenated over sequences, in call order, then in each list's order.
  std::vector<float> logits;        // [total logit rows, vocab_size]
  std::vector<float> hidden_pre;    // [total hidden rows, hidden_size] before the final norm
  std::vector<float> hidden_post;   // [total hidden rows, hidden_size] after the final norm
  // [total hidden rows, streams × hidden_size]: for each hidden row, the residual streams
  // Model::capture_streams() named, in that order (empty when it named none).
  std::vector<float> streams;
};

class MtpHead;

class Model {
 public:
  // Reads config.json, picks the architecture from the registry, validates and
  // binds every tensor. Throws nextn::Error naming the file and tensor/key.
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options = {});
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  virtual const std::string& dir() const = 0;
  // Bytes of weights read per decode step (for GB/s reporting).
  virtual size_t weight_bytes() const = 0;

  // A fresh (empty) state for one sequence of up to max_tokens tokens; `options` is the
  // storage of its attention layers' KV.
  virtual std::unique_ptr<SequenceState> new_state(int max_tokens, const KvOptions& options) const = 0;
  virtual void forward(std::span<SequenceRows> sequences, ForwardResult& result) = 0;
  // Residual streams forward() also returns for every hidden row (ForwardResult::streams),
  // for drafters that read the target's inner layers (EAGLE-3, DFlash). Stream l is the
  // input of layer l before its norm: 0 the (scaled) embedding, num_layers the final
  // pre-norm output. Set when the drafter is built; an index outside 0..num_layers is an
  // nextn::Error.
  virtual void capture_streams(std::vector<int> streams) = 0;
  virtual const std::vector<int>& captured_streams() const = 0;
  // What the trunk's routed layers (Mixture of Experts) have done so far; zero for a
  // dense model. Take differences around a forward.
  virtual RoutedStats routed_stats() const { return {}; }

  // The MTP layers inside the checkpoint (nullptr when it has none).
  virtual MtpHead* mtp_head() = 0;
};

}  // namespace nextn
