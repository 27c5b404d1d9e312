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

#include "state/sequence_state.h"

namespace nextn {

struct BlockScratch;

// The rows of one sequence inside a block call: rows [row0, row0 + n) of the batch at
// positions [pos, pos + n) of `state` (pos == state->length()). With `snapshots` a
// recurrent layer keeps its state after every row (a speculative verify).
struct StateSegment {
  SequenceState* state = nullptr;
  int row0 = 0;
  int n = 0;
  int pos = 0;
  bool snapshots = false;
};

// One batched call: x [n_rows, hidden] is the residual stream, updated in place.
struct BlockRows {
  float* x = nullptr;
  int n_rows = 0;
  const int32_t* positions = nullptr;  // [n_rows]
  std::span<const StateSegment> segments;
};

class Block {
 public:
  virtual ~Block() = default;
  // `layer` is this layer's index in each sequence's state.
  virtual void forward(int layer, const BlockRows& rows, BlockScratch& scratch) = 0;
};

}  // namespace nextn
