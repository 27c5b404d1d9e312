// kv/turbo_cache.h — TurboQuant KV storage (turbo3 default, turbo4 option).
//
// Tokens arrive in a full-precision F16 ring (the "hot" window). Once a sequence
// is longer than options.compress_after, every token older than the
// options.keep_recent most recent ones is compressed, in chunks, exactly once:
// per KV head the row is zero-padded to a multiple of the rotation block B (128,
// or 64 when head_dim is a multiple of 64 but not of 128), each block gets a
// randomized Walsh–Hadamard rotation (fixed seed), its coordinates the Lloyd–Max
// code of the normalized value (3 or 4 bits, turbo_codebook.h) and one f16
// norm-corrected scale. K and V use the same format. No QJL residual.
//
// Attention (compressed_attention.h) rotates each query once, scores the codes
// through the centroid table, accumulates values in the rotated domain and
// rotates the sum back once; the hot window is attended in F16 within the same
// online softmax. Appends are O(new tokens); truncate() may cut into the
// compressed region (rows are per token, so it only moves two counters).
#pragma once
#include <memory>
#include <vector>

#include "kv/hadamard.h"
#include "kv/kv_cache.h"
#include "kv/kv_codec.h"

namespace nextn {

class TurboCache : public KvCache {
 public:
  // options.type: kTurbo3 or kTurbo4.
  TurboCache(const KvShape& shape, const KvOptions& options);

  const KvShape& shape() const override { return shape_; }
  KvType type() const override { return type_; }
  int length() const override { return layers_.empty() ? 0 : layers_[0].length; }
  void truncate(int n_tokens) override;
  void append(int layer, int pos, int n, const float* k, const float* v) override;
  void attend(int layer, int pos, int n, const float* q, float* out, float scale) const override;
  size_t bytes_used() const override;

  // Tokens of `layer` held compressed (the rest are in the F16 window).
  int compressed_length(int layer) const { return layers_[layer].compressed; }
  // What attention sees for token t of `layer` (dequantized, rotated back):
  // n_kv_heads × head_dim floats each.
  void read(int layer, int t, float* k, float* v) const;
  const RowFormat& compressed_format() const { return packed_; }
  const RandomizedHadamard& rotation() const { return rotation_; }
  int ring_capacity() const { return ring_; }

 private:
  struct Layer {
    std::unique_ptr<uint8_t[]> packed;  // [K|V][kv head][max_tokens][packed row]
    std::unique_ptr<uint8_t[]> hot;     // [K|V][kv head][ring][F16 row]
    int length = 0;
    int compressed = 0;                 // positions [0, compressed) are packed
  };
  const uint8_t* packed_row(int layer, bool value, int head, int t) const;
  const uint8_t* hot_row(int layer, bool value, int head, int t) const;  // t: absolute position
  uint8_t* mutable_row(const uint8_t* p) const { return const_cast<uint8_t*>(p); }
  void compress(int layer, int end);  // packs positions [compressed, end)
  void maybe_compress(int layer);

  KvShape shape_;
  KvType type_;
  KvOptions options_;
  int padded_dim_;
  int chunk_;          // tokens compressed at a time once past compress_after
  int ring_;           // hot window capacity
  RowFormat packed_, hot_;
  RandomizedHadamard rotation_;
  std::vector<Layer> layers_;
};

}  // namespace nextn
