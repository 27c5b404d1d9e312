// kv/kv_cache.h — the per-sequence attention KV cache and the attention over it.
// A cache holds every layer's keys and values for one sequence. Each storage type
// (F32/F16/BF16, group-quantized Q8/Q4, TurboQuant) implements its own attention,
// so attention always runs directly on the stored format. Rollback is truncate().
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace nextn {

enum class KvType { kF32, kF16, kBF16, kQ8, kQ4, kTurbo3, kTurbo4 };

const char* kv_type_name(KvType type);           // "f32", "f16", "bf16", "q8", "q4", "turbo3", "turbo4"
KvType parse_kv_type(const std::string& name);   // throws nextn::Error on unknown names

struct KvShape {
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // GQA: n_heads % n_kv_heads == 0
  int head_dim = 0;
  int max_tokens = 0;  // capacity (context size)
  // Sliding-window attention (Gemma): a query at position i sees keys j with
  // i - window < j <= i; 0: every earlier key. A windowed cache is a ring that keeps
  // only the newest `ring_tokens` positions (window + the most rows one forward appends,
  // so rejected speculative rows never overwrite keys the accepted prefix still needs).
  int window = 0;
  int ring_tokens = 0;
};

struct KvOptions {
  KvType type = KvType::kF16;
  int group_size = 64;         // Q8/Q4 quantization group
  int compress_after = 2048;   // TurboQuant: sequences shorter than this stay full precision
  int keep_recent = 256;       // TurboQuant: most recent tokens kept in full precision
};

// Q8/Q4 groups must divide the head dimension. The group for heads of head_dim values
// when the caller did not choose one: `group` halved until it divides head_dim
// (head_dim <= 0: unknown, `group` unchanged).
int group_size_fitting(int group, int head_dim);

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual const KvShape& shape() const = 0;
  virtual KvType type() const = 0;
  // Tokens stored (identical for every layer between forward passes).
  virtual int length() const = 0;
  // Rollback: forget every token at position >= n_tokens (n_tokens <= length()).
  // A ring cache can go back only to n_tokens >= min_truncate_length() (or 0).
  virtual void truncate(int n_tokens) = 0;
  // The shortest length n > 0 that truncate(n) keeps every key a query at n needs;
  // 0 for caches that keep every position.
  virtual int min_truncate_length() const { return 0; }

  // Layer `layer`: store rows for positions [pos, pos + n). k and v are
  // [n, n_kv_heads * head_dim] float32, RoPE already applied to k. pos == the
  // layer's current length (appends only). Cost is O(n), never a re-copy.
  virtual void append(int layer, int pos, int n, const float* k, const float* v) = 0;

  // Layer `layer`: causal attention for n query rows at positions [pos, pos + n)
  // (row i sees keys 0..pos+i, or its last `window` of them). q and out are
  // [n, n_heads * head_dim] float32,
  // q RoPE'd; scale = 1/sqrt(head_dim) unless given.
  virtual void attend(int layer, int pos, int n, const float* q, float* out, float scale) const = 0;
  // attend(), except that row i sees every key before key_end[i] (a position ≤ pos + n;
  // values ≤ pos + i change nothing) instead of only those up to pos + i, the window
  // still bounding the past: the rows of one image seeing each other (Gemma 4's
  // use_bidirectional_attention "vision", sliding layers). The full-precision caches,
  // which every windowed layer gets, implement it; the others refuse (kUnsupported).
  virtual void attend_ahead(int layer, int pos, int n, const float* q, float* out, float scale,
                            const int32_t* key_end) const;

  // Bytes of memory the stored tokens occupy now (for /health, /metrics, bench).
  virtual size_t bytes_used() const = 0;
  // Bytes the same tokens would take in F16 (compression ratio = this / bytes_used()).
  size_t f16_equivalent_bytes() const;
};

// Windowed shapes always get full-precision ring storage (options.type when it is
// F32/F16/BF16, else F16): the window bounds their memory already.
std::unique_ptr<KvCache> make_kv_cache(const KvShape& shape, const KvOptions& options);

}  // namespace nextn
