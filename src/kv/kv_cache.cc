// kv/kv_cache.cc — KV type names and the storage factory (one line per type).
#include "kv/kv_cache.h"

#include <algorithm>

#include "kv/full_precision_cache.h"
#include "kv/quantized_cache.h"
#include "kv/turbo_cache.h"
#include "util/error.h"

namespace nextn {

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::kF32: return "f32";
    case KvType::kF16: return "f16";
    case KvType::kBF16: return "bf16";
    case KvType::kQ8: return "q8";
    case KvType::kQ4: return "q4";
    case KvType::kTurbo3: return "turbo3";
    case KvType::kTurbo4: return "turbo4";
  }
  return "?";
}

KvType parse_kv_type(const std::string& name) {
  for (KvType t : {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kQ8, KvType::kQ4, KvType::kTurbo3,
                   KvType::kTurbo4})
    if (name == kv_type_name(t)) return t;
  fail(ErrorKind::kBadInput, "unknown KV cache type '{}' (known: f32, f16, bf16, q8, q4, turbo3, turbo4)", name);
}

int group_size_fitting(int group, int head_dim) {
  if (head_dim <= 0) return group;
  while (group > 1 && head_dim % group != 0) group /= 2;
  return group;
}

void KvCache::attend_ahead(int, int, int, const float*, float*, float, const int32_t*) const {
  fail(ErrorKind::kUnsupported, "{} KV cache: attention past a row's own position (an image seeing itself) is not "
       "supported; use an f32/f16/bf16 cache", kv_type_name(type()));
}

size_t KvCache::f16_equivalent_bytes() const {
  const KvShape& s = shape();
  const size_t tokens = s.window > 0 ? std::min(length(), s.ring_tokens) : length();
  return tokens * s.n_layers * 2 * s.n_kv_heads * s.head_dim * 2;
}

std::unique_ptr<KvCache> make_kv_cache(const KvShape& shape, const KvOptions& options) {
  if (shape.n_layers <= 0 || shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.max_tokens <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    fail(ErrorKind::kInternal, "invalid KV shape: {} layers, {} heads, {} kv heads, head_dim {}, {} tokens",
         shape.n_layers, shape.n_heads, shape.n_kv_heads, shape.head_dim, shape.max_tokens);
  if (shape.window > 0) {
    if (shape.ring_tokens < shape.window)
      fail(ErrorKind::kInternal, "KV ring of {} tokens for a window of {}", shape.ring_tokens, shape.window);
    const bool full = options.type == KvType::kF32 || options.type == KvType::kF16 || options.type == KvType::kBF16;
    return std::make_unique<FullPrecisionCache>(shape, full ? options.type : KvType::kF16);
  }
  switch (options.type) {
    case KvType::kF32:
    case KvType::kF16:
    case KvType::kBF16: return std::make_unique<FullPrecisionCache>(shape, options.type);
    // Quantized storage — a KV type is one file in kv/ plus its case here, its name above
    // and its KvType (the CLI help and tests that list types: docs/architecture.md, "How to add"):
    case KvType::kQ8: case KvType::kQ4: return std::make_unique<QuantizedCache>(shape, options);
    case KvType::kTurbo3: case KvType::kTurbo4: return std::make_unique<TurboCache>(shape, options);
    default: break;
  }
  fail(ErrorKind::kUnsupported, "KV cache type '{}' is not available in this build", kv_type_name(options.type));
}

}  // namespace nextn
