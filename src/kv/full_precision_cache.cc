// kv/full_precision_cache.cc — F32/F16/BF16 KV storage and its attention.
#include "kv/full_precision_cache.h"

#include <algorithm>
#include <limits>

#include "kv/attention_simd.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace nextn {

FullPrecisionCache::FullPrecisionCache(const KvShape& shape, KvType type) : shape_(shape), type_(type) {
  switch (type) {
    case KvType::kF32: dtype_ = DType::kF32; break;
    case KvType::kF16: dtype_ = DType::kF16; break;
    case KvType::kBF16: dtype_ = DType::kBF16; break;
    default: fail(ErrorKind::kInternal, "FullPrecisionCache: type {} is not full precision", kv_type_name(type));
  }
  elem_ = dtype_size(dtype_);
  blocks_.resize(shape.n_layers);
  lengths_.assign(shape.n_layers, 0);
  high_water_.assign(shape.n_layers, 0);
  // A span of ring_tokens positions starting anywhere touches at most this many blocks.
  if (shape.window > 0) ring_blocks_ = (shape.ring_tokens + kBlockTokens - 1) / kBlockTokens + 1;
}

int FullPrecisionCache::first_stored(int layer) const {
  if (ring_blocks_ == 0 || high_water_[layer] == 0) return 0;
  // Block b is overwritten by block b + ring_blocks: the newest block written decides.
  const int newest_block = (high_water_[layer] - 1) / kBlockTokens;
  return std::max(0, (newest_block - ring_blocks_ + 1) * kBlockTokens);
}

int FullPrecisionCache::min_truncate_length() const {
  if (ring_blocks_ == 0) return 0;
  int n = 0;
  for (int l = 0; l < shape_.n_layers; ++l) {
    const int first = first_stored(l);
    if (first > 0) n = std::max(n, first + shape_.window);  // a query at n needs keys n - window .. n - 1
  }
  return n;
}

int FullPrecisionCache::length() const {
  int n = 0;
  for (int len : lengths_) n = std::max(n, len);
  return n;
}

void FullPrecisionCache::truncate(int n_tokens) {
  if (n_tokens < 0 || n_tokens > length())
    fail(ErrorKind::kInternal, "KV truncate to {} tokens, but {} are stored", n_tokens, length());
  if (n_tokens == length()) return;
  if (n_tokens > 0 && n_tokens < min_truncate_length())
    fail(ErrorKind::kInternal, "KV truncate to {} tokens: the window ring no longer holds the keys before it (from {})",
         n_tokens, min_truncate_length());
  for (int& len : lengths_) len = std::min(len, n_tokens);
  if (n_tokens == 0) std::fill(high_water_.begin(), high_water_.end(), 0);
}

size_t FullPrecisionCache::bytes_used() const {
  size_t tokens = 0;
  for (int len : lengths_)
    tokens += static_cast<size_t>(ring_blocks_ > 0 ? std::min(len, shape_.ring_tokens) : len);
  return tokens * 2 * shape_.n_kv_heads * shape_.head_dim * elem_;
}

const void* FullPrecisionCache::row(int layer, int t, int head, bool value) const {
  const int b = t / kBlockTokens;
  const unsigned char* block = blocks_[layer][size_t(ring_blocks_ > 0 ? b % ring_blocks_ : b)].get();
  const size_t offset = (size_t(head) * kBlockTokens + t % kBlockTokens) * shape_.head_dim * elem_;
  return block + (value ? half_block_bytes() : 0) + offset;
}

void FullPrecisionCache::append(int layer, int pos, int n, const float* k, const float* v) {
  if (layer < 0 || layer >= shape_.n_layers) fail(ErrorKind::kInternal, "KV append: layer {} out of range", layer);
  if (pos != lengths_[layer])
    fail(ErrorKind::kInternal, "KV append at position {} but layer {} holds {} tokens", pos, layer, lengths_[layer]);
  if (pos + n > shape_.max_tokens)
    fail(ErrorKind::kResource, "KV cache full: {} + {} tokens exceed the capacity of {}", pos, n, shape_.max_tokens);
  auto& blocks = blocks_[layer];
  size_t needed = static_cast<size_t>((pos + n + kBlockTokens - 1) / kBlockTokens);
  if (ring_blocks_ > 0) {
    needed = std::min(needed, size_t(ring_blocks_));
    // The first new row needs keys from pos - window + 1 on: they must survive this append.
    const int hw = std::max(high_water_[layer], pos + n);
    const int newest_block = (hw - 1) / kBlockTokens;
    const int first_after = std::max(0, (newest_block - ring_blocks_ + 1) * kBlockTokens);
    if (first_after > std::max(0, pos - shape_.window + 1))
      fail(ErrorKind::kInternal, "KV append of {} rows at {} overruns the window ring ({} tokens)", n, pos,
           shape_.ring_tokens);
    high_water_[layer] = hw;
  }
  while (blocks.size() < needed) blocks.emplace_back(new unsigned char[2 * half_block_bytes()]());
  const int D = shape_.head_dim, KV = shape_.n_kv_heads;
  for (int i = 0; i < n; ++i) {
    const int t = pos + i;
    for (int h = 0; h < KV; ++h) {
      const size_t src = (size_t(i) * KV + h) * D;
      kv_store(dtype_, k + src, D, const_cast<void*>(row(layer, t, h, false)));
      kv_store(dtype_, v + src, D, const_cast<void*>(row(layer, t, h, true)));
    }
  }
  lengths_[layer] = pos + n;
}

namespace {

// Per-thread buffers of attend(); grown once, reused across calls.
struct AttendScratch {
  std::vector<float> k, v, kt, scores, m, l, acc;
  std::vector<const float*> qs;
  std::vector<float*> accs;
  std::vector<int> visible, lo, hi;
};
thread_local AttendScratch t_scratch;

void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Rows per work item. Every item converts (and on the multi-query path transposes) each
// key block its rows see, so a 4096-row prefill in items of 16 rows prepared every block
// 256 times per KV head: a sixth of that prefill's time. Long prefills take items of 32
// or 64 rows. The size follows from n alone (not the thread count), so which rows share
// an item — and with it which path each row takes — is the same on every machine.
constexpr int kRowChunk = 16;
int rows_per_item(int n) { return n >= 2048 ? 64 : n >= 512 ? 32 : kRowChunk; }

// From this many queries per item on (rows x GQA group), the queries share each block's
// key and value loads (prefill: transposed keys for unwindowed layers, attend_block_rows
// for windowed ones); below it each query runs alone (decode).
constexpr int kMultiQueryMin = 16;
static_assert(FullPrecisionCache::kBlockTokens == 64, "attend_block_rows holds scores of 64 keys per query");

}  // namespace

void FullPrecisionCache::attend(int layer, int pos, int n, const float* q, float* out, float scale) const {
  attend_ahead(layer, pos, n, q, out, scale, nullptr);
}

// key_end null: causal (row r sees keys up to pos + r).
void FullPrecisionCache::attend_ahead(int layer, int pos, int n, const float* q, float* out, float scale,
                                      const int32_t* key_end) const {
  if (n <= 0) return;
  if (layer < 0 || layer >= shape_.n_layers) fail(ErrorKind::kInternal, "KV attend: layer {} out of range", layer);
  if (pos + n > lengths_[layer])
    fail(ErrorKind::kInternal, "KV attend over positions up to {} but layer {} holds {} tokens", pos + n, layer,
         lengths_[layer]);
  if (shape_.window > 0 && std::max(0, pos - shape_.window + 1) < first_stored(layer))
    fail(ErrorKind::kInternal, "KV attend at {}: the window ring of layer {} starts at {}", pos, layer,
         first_stored(layer));
  if (key_end)
    for (int r = 0; r < n; ++r)
      if (key_end[r] > pos + n)
        fail(ErrorKind::kInternal, "KV attend: row {} sees up to {} but only {} positions are stored", r, key_end[r],
             pos + n);
  const int D = shape_.head_dim, KV = shape_.n_kv_heads, H = shape_.n_heads;
  const int group = H / KV;
  const int chunk_rows = rows_per_item(n);
  const int row_chunks = (n + chunk_rows - 1) / chunk_rows;
  const size_t items = size_t(KV) * row_chunks;

  auto work = [&](size_t begin, size_t end, int) {
    AttendScratch& s = t_scratch;
    grow(s.k, size_t(kBlockTokens) * D);
    grow(s.v, size_t(kBlockTokens) * D);
    grow(s.scores, size_t(group) * kBlockTokens);  // the one-query-row path scores a whole group
    grow(s.m, size_t(chunk_rows) * group);
    grow(s.l, size_t(chunk_rows) * group);
    grow(s.acc, size_t(chunk_rows) * group * D);
    for (size_t item = begin; item < end; ++item) {
      const int kvh = static_cast<int>(item / row_chunks);
      const int r0 = static_cast<int>(item % row_chunks) * chunk_rows;
      const int r1 = std::min(n, r0 + chunk_rows);
      const int states = (r1 - r0) * group;
      std::fill_n(s.m.begin(), states, -std::numeric_limits<float>::infinity());
      std::fill_n(s.l.begin(), states, 0.0f);
      std::fill_n(s.acc.begin(), size_t(states) * D, 0.0f);
      // Row r sees keys before end_of(r): pos + r + 1, or further for an image's rows.
      auto end_of = [&](int r) { return key_end ? std::max(pos + r + 1, int(key_end[r])) : pos + r + 1; };
      int visible_end = pos + r1;  // keys [0, visible_end) are seen by some row of the chunk
      if (key_end)
        for (int r = r0; r < r1; ++r) visible_end = std::max(visible_end, end_of(r));
      // Windowed: row r sees keys [pos + r - window + 1, end_of(r)). Blocks before the
      // chunk's first row's window are never read.
      const int window = shape_.window;
      const int first_key = window > 0 ? std::max(0, pos + r0 - window + 1) : 0;
      // Three paths. Few queries (decode, short verifies): one query at a time. Many
      // queries, unwindowed: keys transposed once per block and shared (rounds its dot
      // products differently from the one-query path, within float rounding). Many
      // queries, windowed: attend_block_rows, each query bounded by its own window and end
      // inside a block, bit-identical to the one-query path, so a prefill split never
      // changes a sliding layer's output. That matters beyond float rounding with F16 or
      // BF16 KV: a later layer's keys and values are rounded to 11 (8) bits when stored,
      // and a last-bit difference here can move one of them across a rounding boundary,
      // a 2^-11 relative step. An earlier windowed attempt sent the blocks every row sees
      // from their first key through the transposed kernel and the rest one query at a
      // time: its ranges were right (F32 KV stayed at float rounding, 2e-6), but with F16
      // KV Gemma 4's prefill splits drifted from token-by-token decode past 1e-5 for that
      // reason (rebuilt on the tiny test model: 1.3e-5 against 1.3e-6 with F16, 1.6e-6
      // against 1.9e-6 with F32); this path leaves the sliding layers exact.
      const bool multi = states >= kMultiQueryMin && window == 0;
      const bool rows = states >= kMultiQueryMin && window > 0;
      const int lanes = static_cast<int>(attention_lanes());
      const int stride = (kBlockTokens + lanes - 1) / lanes * lanes;
      if (rows) {
        grow(s.scores, size_t(4) * kBlockTokens);
        s.lo.resize(states);
        s.hi.resize(states);
      }
      if (multi) {
        grow(s.kt, size_t(stride) * D);
        grow(s.scores, size_t(4) * stride);
      }
      if (multi || rows) {
        s.qs.resize(states);
        s.accs.resize(states);
        s.visible.resize(states);
        for (int r = r0; r < r1; ++r)
          for (int j = 0; j < group; ++j) {
            const int state = (r - r0) * group + j;
            s.qs[state] = q + (size_t(r) * H + kvh * group + j) * D;
            s.accs[state] = s.acc.data() + size_t(state) * D;
          }
      }
      for (int t0 = first_key / kBlockTokens * kBlockTokens; t0 < visible_end; t0 += kBlockTokens) {
        const int count = std::min(kBlockTokens, visible_end - t0);
        if (!multi && !rows) {
          // One query row (decode, or rows too few to share a converted block): the rows
          // are read in place, F16 and BF16 promoted to float inside the kernel
          // (bit-identical to converting them first), once for the row's whole GQA group;
          // the first call on this block prefetches this head's next block: decode at a
          // long context is one stream over the whole cache.
          const auto* kb = static_cast<const unsigned char*>(row(layer, t0, kvh, false));
          const auto* vb = static_cast<const unsigned char*>(row(layer, t0, kvh, true));
          const int next_t0 = t0 + kBlockTokens;
          const bool has_next = next_t0 < visible_end;
          const void* next_k = has_next ? row(layer, next_t0, kvh, false) : nullptr;
          const void* next_v = has_next ? row(layer, next_t0, kvh, true) : nullptr;
          const int next_count = has_next ? std::min(kBlockTokens, visible_end - next_t0) : 0;
          bool prefetched = false;
          for (int r = r0; r < r1; ++r) {
            const int visible = std::min(count, end_of(r) - t0);  // causal: row r sees keys <= pos + r
            const int skip = window > 0 ? std::max(0, pos + r - window + 1 - t0) : 0;  // keys left of the window
            if (visible <= skip) continue;
            const size_t skip_bytes = size_t(skip) * D * elem_;
            const int state = (r - r0) * group;  // the group's queries are consecutive heads
            attend_block_stored(dtype_, q + (size_t(r) * H + size_t(kvh) * group) * D, group, kb + skip_bytes,
                                vb + skip_bytes, visible - skip, D, scale, s.scores.data(), &s.m[state], &s.l[state],
                                s.acc.data() + size_t(state) * D, prefetched ? nullptr : next_k,
                                prefetched ? nullptr : next_v, next_count);
            prefetched = true;
          }
          continue;
        }
        // Many queries: the block converted to float once and shared by them.
        const float* kf;
        const float* vf;
        if (dtype_ == DType::kF32) {
          kf = static_cast<const float*>(row(layer, t0, kvh, false));
          vf = static_cast<const float*>(row(layer, t0, kvh, true));
        } else {
          // Keys before first_key are seen by no row of this chunk: not converted (the
          // conversion to float is exact, so where it happens changes nothing).
          const int from = std::max(0, first_key - t0);
          const size_t skip_bytes = size_t(from) * D * elem_;
          kv_load_f32(dtype_, static_cast<const unsigned char*>(row(layer, t0, kvh, false)) + skip_bytes,
                      size_t(count - from) * D, s.k.data() + size_t(from) * D);
          kv_load_f32(dtype_, static_cast<const unsigned char*>(row(layer, t0, kvh, true)) + skip_bytes,
                      size_t(count - from) * D, s.v.data() + size_t(from) * D);
          kf = s.k.data();
          vf = s.v.data();
        }
        if (rows) {
          // Row r's keys in this block: [lo, hi), the same range the one-query path above
          // gives attend_block ([skip, visible)); empty when lo >= hi.
          for (int r = r0; r < r1; ++r) {
            const int lo = std::clamp(pos + r - window + 1 - t0, 0, count);
            const int hi = std::clamp(end_of(r) - t0, 0, count);
            for (int j = 0; j < group; ++j) {
              s.lo[(r - r0) * group + j] = lo;
              s.hi[(r - r0) * group + j] = hi;
            }
          }
          attend_block_rows(s.qs.data(), states, kf, vf, D, scale, s.lo.data(), s.hi.data(), s.scores.data(),
                            s.m.data(), s.l.data(), s.accs.data());
          continue;
        }
        if (multi) {
          float* kt = s.kt.data();
          for (int d = 0; d < D; ++d) {
            float* dst = kt + size_t(d) * stride;
            for (int t = 0; t < count; ++t) dst[t] = kf[size_t(t) * D + d];
            for (int t = count; t < stride; ++t) dst[t] = 0.0f;
          }
          for (int r = r0; r < r1; ++r) {
            const int visible = std::clamp(end_of(r) - t0, 0, count);  // causal: row r sees keys <= pos + r
            for (int j = 0; j < group; ++j) s.visible[(r - r0) * group + j] = visible;
          }
          attend_block_multi(s.qs.data(), states, kt, stride, vf, count, D, scale, s.visible.data(), s.scores.data(),
                             s.m.data(), s.l.data(), s.accs.data());
        }
      }
      for (int r = r0; r < r1; ++r)
        for (int j = 0; j < group; ++j) {
          const int h = kvh * group + j;
          const int state = (r - r0) * group + j;
          const float inv = 1.0f / s.l[state];
          const float* acc = s.acc.data() + size_t(state) * D;
          float* o = out + (size_t(r) * H + h) * D;
          for (int d = 0; d < D; ++d) o[d] = acc[d] * inv;
        }
    }
  };
  // Small problems stay on the calling thread.
  const size_t work_size = size_t(n) * H * (pos + n) * D;
  if (items == 1 || work_size < 16384) {
    work(0, items, 0);
  } else {
    parallel_for(items, work);
  }
}

}  // namespace nextn
