// kv/turbo_cache.cc — TurboQuant KV storage (see turbo_cache.h).
#include "kv/turbo_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kv/compressed_attention.h"
#include "kv/turbo_codebook.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace nextn {

namespace {

constexpr int kAppendPiece = 64;  // tokens written to the ring before the policy runs

int rotation_block(int head_dim) { return head_dim % 128 != 0 && head_dim % 64 == 0 ? 64 : 128; }

}  // namespace

TurboCache::TurboCache(const KvShape& shape, const KvOptions& options)
    : shape_(shape),
      type_(options.type),
      options_(options),
      padded_dim_((shape.head_dim + rotation_block(shape.head_dim) - 1) / rotation_block(shape.head_dim) *
                  rotation_block(shape.head_dim)),
      rotation_(rotation_block(shape.head_dim)) {
  if (type_ != KvType::kTurbo3 && type_ != KvType::kTurbo4)
    fail(ErrorKind::kInternal, "TurboCache: type '{}' is not turbo3/turbo4", kv_type_name(type_));
  if (options.compress_after < 0) fail(ErrorKind::kBadInput, "--turbo-after must be >= 0, got {}", options.compress_after);
  if (options.keep_recent < 0) fail(ErrorKind::kBadInput, "--turbo-keep-recent must be >= 0, got {}", options.keep_recent);
  if (padded_dim_ > kMaxRowDim || shape.head_dim % 16 != 0)
    fail(ErrorKind::kUnsupported, "{} KV cache: head_dim {} not supported (multiple of 16, at most {})",
         kv_type_name(type_), shape.head_dim, kMaxRowDim);
  const int bits = type_ == KvType::kTurbo3 ? 3 : 4;
  const int block = rotation_.block();
  packed_.codec = bits == 3 ? RowCodec::kTurbo3 : RowCodec::kTurbo4;
  packed_.dim = padded_dim_;
  packed_.group = block;
  packed_.table = turbo_codebook(bits, block).centroids;
  hot_.codec = RowCodec::kF16;
  hot_.dim = shape.head_dim;
  hot_.group = shape.head_dim;
  chunk_ = options.keep_recent == 0 ? 1 : 64;
  // The window holds at most max(compress_after + 1, keep_recent + chunk) tokens
  // after the policy ran, plus one append piece.
  ring_ = std::min(std::max(options.compress_after + 1, options.keep_recent + chunk_) + kAppendPiece, shape.max_tokens);
  const size_t H = shape.n_kv_heads;
  layers_.resize(shape.n_layers);
  for (Layer& l : layers_) {
    // new[] without (): pages are committed only when written.
    l.packed.reset(new uint8_t[2 * H * shape.max_tokens * packed_.row_bytes()]);
    l.hot.reset(new uint8_t[2 * H * ring_ * hot_.row_bytes()]);
  }
}

const uint8_t* TurboCache::packed_row(int layer, bool value, int head, int t) const {
  const size_t index = (static_cast<size_t>(value) * shape_.n_kv_heads + head) * shape_.max_tokens + t;
  return layers_[layer].packed.get() + index * packed_.row_bytes();
}

const uint8_t* TurboCache::hot_row(int layer, bool value, int head, int t) const {
  const size_t index = (static_cast<size_t>(value) * shape_.n_kv_heads + head) * ring_ + t % ring_;
  return layers_[layer].hot.get() + index * hot_.row_bytes();
}

void TurboCache::truncate(int n_tokens) {
  n_tokens = std::max(0, n_tokens);
  for (Layer& l : layers_) {
    l.length = std::min(l.length, n_tokens);
    l.compressed = std::min(l.compressed, l.length);
  }
}

void TurboCache::compress(int layer, int end) {
  Layer& L = layers_[layer];
  const int begin = L.compressed;
  if (end <= begin) return;
  const int H = shape_.n_kv_heads, D = shape_.head_dim, Dp = padded_dim_;
  auto work = [&](size_t b, size_t e, int) {
    std::vector<float> x(Dp);
    for (size_t item = b; item < e; ++item) {
      const int t = begin + static_cast<int>(item / (2 * H));
      const int rest = static_cast<int>(item % (2 * H));
      const bool value = rest >= H;
      const int h = rest % H;
      decode_row(hot_, hot_row(layer, value, h, t), x.data());
      std::fill(x.begin() + D, x.end(), 0.0f);
      rotation_.forward(x.data(), Dp / rotation_.block());
      encode_row(packed_, x.data(), mutable_row(packed_row(layer, value, h, t)));
    }
  };
  const size_t items = static_cast<size_t>(end - begin) * 2 * H;
  if (items >= 16) parallel_for(items, work);
  else work(0, items, 0);
  L.compressed = end;
}

void TurboCache::maybe_compress(int layer) {
  Layer& L = layers_[layer];
  if (L.length <= options_.compress_after) return;
  const int target = L.length - options_.keep_recent;
  if (target - L.compressed >= chunk_) compress(layer, target);
}

void TurboCache::append(int layer, int pos, int n, const float* k, const float* v) {
  Layer& L = layers_[layer];
  if (pos != L.length)
    fail(ErrorKind::kInternal, "{} KV cache: append at {} but layer {} holds {} tokens", kv_type_name(type_), pos, layer,
         L.length);
  if (pos + n > shape_.max_tokens)
    fail(ErrorKind::kResource, "KV cache full: {} + {} tokens exceed the context size {}", pos, n, shape_.max_tokens);
  const int H = shape_.n_kv_heads, D = shape_.head_dim;
  for (int done = 0; done < n;) {
    const int piece = std::min(kAppendPiece, n - done);
    for (int t = done; t < done + piece; ++t)
      for (int h = 0; h < H; ++h) {
        const size_t src = static_cast<size_t>(t) * H * D + static_cast<size_t>(h) * D;
        encode_row(hot_, k + src, mutable_row(hot_row(layer, false, h, pos + t)));
        encode_row(hot_, v + src, mutable_row(hot_row(layer, true, h, pos + t)));
      }
    done += piece;
    L.length = pos + done;
    maybe_compress(layer);
  }
}

void TurboCache::attend(int layer, int pos, int n, const float* q, float* out, float scale) const {
  const Layer& L = layers_[layer];
  const int H = shape_.n_kv_heads, D = shape_.head_dim;
  if (pos + n > L.length)
    fail(ErrorKind::kInternal, "{} KV cache: attend rows up to {} but layer {} holds {} tokens", kv_type_name(type_),
         pos + n, layer, L.length);
  if (!(scale > 0)) scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int hot_begin = L.compressed, hot_count = L.length - L.compressed;
  attend_all_kv_heads(shape_.n_heads, H, D, pos, n, q, out, scale, &rotation_, padded_dim_, [&](int h, AttnSegment* segs) {
    int n_segs = 0;
    if (L.compressed > 0) {
      AttnSegment& s = segs[n_segs++];
      s.format = packed_;
      s.k = packed_row(layer, false, h, 0);
      s.v = packed_row(layer, true, h, 0);
      s.stride = packed_.row_bytes();
      s.first = 0;
      s.count = L.compressed;
      s.rotated = true;
    }
    // The window may wrap around the ring: at most two contiguous pieces.
    for (int done = 0; done < hot_count;) {
      const int t = hot_begin + done;
      const int run = std::min(hot_count - done, ring_ - t % ring_);
      AttnSegment& s = segs[n_segs++];
      s.format = hot_;
      s.k = hot_row(layer, false, h, t);
      s.v = hot_row(layer, true, h, t);
      s.stride = hot_.row_bytes();
      s.first = t;
      s.count = run;
      done += run;
    }
    return n_segs;
  });
}

size_t TurboCache::bytes_used() const {
  size_t total = 0;
  for (const Layer& l : layers_)
    total += 2 * static_cast<size_t>(shape_.n_kv_heads) *
             (static_cast<size_t>(l.compressed) * packed_.row_bytes() +
              static_cast<size_t>(l.length - l.compressed) * hot_.row_bytes());
  return total;
}

void TurboCache::read(int layer, int t, float* k, float* v) const {
  const int H = shape_.n_kv_heads, D = shape_.head_dim;
  std::vector<float> x(padded_dim_);
  for (int value = 0; value < 2; ++value)
    for (int h = 0; h < H; ++h) {
      float* dst = (value ? v : k) + static_cast<size_t>(h) * D;
      if (t < layers_[layer].compressed) {
        decode_row(packed_, packed_row(layer, value, h, t), x.data());
        rotation_.inverse(x.data(), padded_dim_ / rotation_.block());
      } else {
        decode_row(hot_, hot_row(layer, value, h, t), x.data());
      }
      std::copy(x.begin(), x.begin() + D, dst);
    }
}

}  // namespace nextn
