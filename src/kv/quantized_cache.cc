// kv/quantized_cache.cc — Q8/Q4 group-quantized KV storage (see quantized_cache.h).
#include "kv/quantized_cache.h"

#include <algorithm>
#include <vector>

#include "kv/compressed_attention.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace nextn {

void validate_kv_group_size(int group_size, int head_dim) {
  if (group_size != 32 && group_size != 64 && group_size != 128)
    fail(ErrorKind::kBadInput, "kv_group_size must be 32, 64 or 128, got {}", group_size);
  if (head_dim % group_size != 0)
    fail(ErrorKind::kBadInput, "kv_group_size {} does not divide the model's head_dim {}", group_size, head_dim);
}

QuantizedCache::QuantizedCache(const KvShape& shape, const KvOptions& options)
    : shape_(shape), type_(options.type), lengths_(shape.n_layers, 0) {
  if (type_ != KvType::kQ8 && type_ != KvType::kQ4)
    fail(ErrorKind::kInternal, "QuantizedCache: type '{}' is not q8/q4", kv_type_name(type_));
  validate_kv_group_size(options.group_size, shape.head_dim);
  if (shape.head_dim > kMaxRowDim)
    fail(ErrorKind::kUnsupported, "{} KV cache: head_dim {} exceeds {}", kv_type_name(type_), shape.head_dim, kMaxRowDim);
  format_.codec = type_ == KvType::kQ8 ? RowCodec::kQ8 : RowCodec::kQ4;
  format_.dim = shape.head_dim;
  format_.group = options.group_size;
  const size_t per_layer = 2 * static_cast<size_t>(shape.n_kv_heads) * shape.max_tokens * format_.row_bytes();
  storage_.resize(shape.n_layers);
  // new[] without () leaves the bytes uninitialized: pages are committed only when written.
  for (auto& s : storage_) s.reset(new uint8_t[per_layer]);
}

const uint8_t* QuantizedCache::row(int layer, bool value, int head, int t) const {
  const size_t rb = format_.row_bytes();
  const size_t index = (static_cast<size_t>(value) * shape_.n_kv_heads + head) * shape_.max_tokens + t;
  return storage_[layer].get() + index * rb;
}

void QuantizedCache::truncate(int n_tokens) {
  for (int& len : lengths_) len = std::min(len, std::max(0, n_tokens));
}

void QuantizedCache::append(int layer, int pos, int n, const float* k, const float* v) {
  if (pos != lengths_[layer])
    fail(ErrorKind::kInternal, "{} KV cache: append at {} but layer {} holds {} tokens", kv_type_name(type_), pos, layer,
         lengths_[layer]);
  if (pos + n > shape_.max_tokens)
    fail(ErrorKind::kResource, "KV cache full: {} + {} tokens exceed the context size {}", pos, n, shape_.max_tokens);
  const int H = shape_.n_kv_heads, D = shape_.head_dim;
  auto encode = [&](size_t begin, size_t end, int) {
    for (size_t item = begin; item < end; ++item) {
      const int t = static_cast<int>(item / H), h = static_cast<int>(item % H);
      const size_t src = static_cast<size_t>(t) * H * D + static_cast<size_t>(h) * D;
      encode_row(format_, k + src, row(layer, false, h, pos + t));
      encode_row(format_, v + src, row(layer, true, h, pos + t));
    }
  };
  const size_t items = static_cast<size_t>(n) * H;
  if (items >= 16) parallel_for(items, encode);
  else encode(0, items, 0);
  lengths_[layer] = pos + n;
}

void QuantizedCache::attend(int layer, int pos, int n, const float* q, float* out, float scale) const {
  const int H = shape_.n_kv_heads, D = shape_.head_dim;
  const int len = lengths_[layer];
  if (pos + n > len)
    fail(ErrorKind::kInternal, "{} KV cache: attend rows up to {} but layer {} holds {} tokens", kv_type_name(type_),
         pos + n, layer, len);
  attend_all_kv_heads(shape_.n_heads, H, D, pos, n, q, out, scale, nullptr, 0, [&](int h, AttnSegment* segs) {
    AttnSegment& seg = segs[0];
    seg.format = format_;
    seg.k = row(layer, false, h, 0);
    seg.v = row(layer, true, h, 0);
    seg.stride = format_.row_bytes();
    seg.first = 0;
    seg.count = len;
    return 1;
  });
}

size_t QuantizedCache::bytes_used() const {
  size_t total = 0;
  for (int len : lengths_) total += static_cast<size_t>(len) * 2 * shape_.n_kv_heads * format_.row_bytes();
  return total;
}

void QuantizedCache::read(int layer, int t, float* k, float* v) const {
  for (int h = 0; h < shape_.n_kv_heads; ++h) {
    decode_row(format_, row(layer, false, h, t), k + static_cast<size_t>(h) * shape_.head_dim);
    decode_row(format_, row(layer, true, h, t), v + static_cast<size_t>(h) * shape_.head_dim);
  }
}

}  // namespace nextn
