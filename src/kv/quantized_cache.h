// kv/quantized_cache.h — KV storage group-quantized to 8 or 4 bits (kv_bits).
// Every token is quantized on append (affine per group of `group_size` values
// along head_dim: f16 scale + f16 bias + codes, see kv_codec.h). Storage per
// layer is one reservation of max_tokens rows per KV head whose pages are only
// touched as tokens arrive, so appends are O(new tokens) and never re-copy.
// Attention runs on the codes (kv_kernels.cc); truncate() just drops the tail.
#pragma once
#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_codec.h"

namespace nextn {

class QuantizedCache : public KvCache {
 public:
  // options.type: kQ8 or kQ4; options.group_size ∈ {32, 64, 128} dividing head_dim.
  QuantizedCache(const KvShape& shape, const KvOptions& options);

  const KvShape& shape() const override { return shape_; }
  KvType type() const override { return type_; }
  int length() const override { return lengths_.empty() ? 0 : lengths_[0]; }
  void truncate(int n_tokens) override;
  void append(int layer, int pos, int n, const float* k, const float* v) override;
  void attend(int layer, int pos, int n, const float* q, float* out, float scale) const override;
  size_t bytes_used() const override;

  // Dequantized keys/values of token t of `layer`: n_kv_heads × head_dim floats each.
  void read(int layer, int t, float* k, float* v) const;
  const RowFormat& format() const { return format_; }

 private:
  const uint8_t* row(int layer, bool value, int head, int t) const;
  uint8_t* row(int layer, bool value, int head, int t) {
    return const_cast<uint8_t*>(static_cast<const QuantizedCache*>(this)->row(layer, value, head, t));
  }

  KvShape shape_;
  KvType type_;
  RowFormat format_;
  std::vector<std::unique_ptr<uint8_t[]>> storage_;  // per layer: [K|V][kv head][max_tokens][row]
  std::vector<int> lengths_;
};

// Throws nextn::Error(kBadInput) naming kv_group_size unless group_size ∈ {32, 64, 128}
// and divides head_dim.
void validate_kv_group_size(int group_size, int head_dim);

}  // namespace nextn
