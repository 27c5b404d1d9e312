// kv/full_precision_cache.h — KV storage in F32, F16 or BF16.
// Per layer, tokens live in fixed blocks of kBlockTokens allocated on demand (append
// never re-copies); inside a block each KV head's keys (and values) are contiguous
// [kBlockTokens, head_dim] rows. Attention runs an online softmax over one block at a
// time, parallel over KV heads and query-row chunks: a few queries (decode) read F16/BF16
// rows in place with the next block prefetched; many queries (prefill) convert each block
// to float32 once and share it.
// A windowed shape (KvShape::window) keeps a ring of blocks: block b lives in slot
// b % ring_blocks, so memory stays at the window plus one forward's rows however long
// the sequence grows; attention then sees each query's last `window` keys only.
#pragma once
#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "util/dtype.h"

namespace nextn {

class FullPrecisionCache : public KvCache {
 public:
  static constexpr int kBlockTokens = 64;

  FullPrecisionCache(const KvShape& shape, KvType type);  // type: kF32, kF16 or kBF16

  const KvShape& shape() const override { return shape_; }
  KvType type() const override { return type_; }
  int length() const override;
  void truncate(int n_tokens) override;
  int min_truncate_length() const override;
  void append(int layer, int pos, int n, const float* k, const float* v) override;
  void attend(int layer, int pos, int n, const float* q, float* out, float scale) const override;
  void attend_ahead(int layer, int pos, int n, const float* q, float* out, float scale,
                    const int32_t* key_end) const override;
  size_t bytes_used() const override;

  // Tokens stored in one layer.
  int layer_length(int layer) const { return lengths_[layer]; }
  // Row of `head` for token `t` of `layer` in the stored dtype (keys or values).
  const void* key_row(int layer, int t, int head) const { return row(layer, t, head, false); }
  const void* value_row(int layer, int t, int head) const { return row(layer, t, head, true); }
  DType storage_dtype() const { return dtype_; }

 private:
  const void* row(int layer, int t, int head, bool value) const;
  // Bytes of the K (or V) part of one block.
  // The first position of `layer` still stored (ring caches overwrite older ones).
  int first_stored(int layer) const;
  size_t half_block_bytes() const { return size_t(kBlockTokens) * shape_.n_kv_heads * shape_.head_dim * elem_; }

  KvShape shape_;
  KvType type_;
  DType dtype_;
  size_t elem_;
  std::vector<std::vector<std::unique_ptr<unsigned char[]>>> blocks_;  // [layer][block]: K half then V half
  std::vector<int> lengths_;
  int ring_blocks_ = 0;            // windowed: blocks per layer in the ring; 0: blocks grow with the sequence
  std::vector<int> high_water_;    // windowed: per layer, 1 + the highest position ever written
};

}  // namespace nextn
