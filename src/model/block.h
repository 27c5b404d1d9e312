// model/block.h — one decoder layer as the forward pass sees it. The generic decoder
// (decoder_model.cc) holds one Block per layer and runs them in order over the
// residual stream; what a block does with its per-sequence state (an attention cache
// slot, a recurrent state) is its own business. Architectures whose layers differ
// from the shared pre-norm attention block supply their own (Architecture::make_block).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "model/routed_stats.h"
#include "state/sequence_state.h"

namespace nextn {

struct BlockScratch;

// The rows of one sequence inside a block call: rows [row0, row0 + n) of the batch at
// positions [pos, pos + n) of `state` (pos == state->length()). With `snapshots` a
// recurrent layer logs every row and leaves its plane as of the first row (a speculative
// verify), so the state can return to any of the rows (state/recurrent_state.h).
struct StateSegment {
  SequenceState* state = nullptr;
  int row0 = 0;
  int n = 0;
  int pos = 0;
  bool snapshots = false;
  // Attend over the state's KV without adding rows (a drafter reading the target's
  // KV at a fixed position: the Gemma 4 assistant).
  bool read_only = false;
};

// One batched call: x [n_rows, hidden] is the residual stream, updated in place.
struct BlockRows {
  float* x = nullptr;
  int n_rows = 0;
  const int32_t* positions = nullptr;  // [n_rows] rotary positions (the t axis under M-RoPE)
  std::span<const StateSegment> segments;
  const int32_t* tokens = nullptr;  // [n_rows] token ids
  // What the architecture's InputStage made for the layers (Gemma 4's per-layer
  // embeddings): row r's inputs at layer_inputs + r * layer_input_stride; null: none.
  const float* layer_inputs = nullptr;
  int64_t layer_input_stride = 0;
  // [n_rows, 3] (t, h, w) M-RoPE positions when a sequence of the call brought them
  // (SequenceRows::positions); null otherwise. Only M-RoPE layers read it.
  const int32_t* axes = nullptr;
  // [n_rows] for a model with ModelConfig::image_bidirectional: for a row of an image (a
  // SequenceRows::embeddings span) the row index just past that image, else -1; null
  // when the call has no image rows. Layers that let an image see itself read it.
  const int32_t* image_end = nullptr;
};

// Per-row inputs of every layer computed once per forward from the token ids and the
// embedded rows, before layer 0 (Gemma 4: per-layer embeddings). Architectures that
// need one supply it (Architecture::make_input_stage).
class InputStage {
 public:
  virtual ~InputStage() = default;
  // Floats per row of the output.
  virtual int64_t stride() const = 0;
  // x0: [n_rows, hidden] the embedded (scaled) rows; out: [n_rows, stride()].
  virtual void forward(const int32_t* tokens, const float* x0, int n_rows, float* out) = 0;
  // Bytes of its weights one decode row reads (a gathered table row, not the table).
  virtual size_t bytes_per_row() const = 0;
};

class Block {
 public:
  virtual ~Block() = default;
  // `layer` is this layer's index in each sequence's state.
  virtual void forward(int layer, const BlockRows& rows, BlockScratch& scratch) = 0;
  // Adds what this layer's routed experts (Mixture of Experts) have done to `into`.
  virtual void add_routed_stats(RoutedStats& into) const { (void)into; }
};

}  // namespace nextn
