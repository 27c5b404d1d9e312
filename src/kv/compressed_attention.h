// kv/compressed_attention.h — causal attention for one KV head over stored rows
// of any kv_codec format, with online softmax across segments.
// A segment is a run of consecutive positions in one format (e.g. TurboQuant
// history in the rotated domain, then the full-precision recent window). Queries
// are rotated once per call for rotated segments; rotated and plain value sums
// are kept apart and merged after one inverse rotation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "kv/kv_codec.h"

namespace nextn {

class RandomizedHadamard;

struct AttnSegment {
  RowFormat format;
  const uint8_t* k = nullptr;  // row of position `first`
  const uint8_t* v = nullptr;
  size_t stride = 0;           // bytes between consecutive positions
  int first = 0;               // absolute position of row 0
  int count = 0;
  bool rotated = false;        // rows hold rotated (padded) vectors
};

struct AttnHeadJob {
  const AttnSegment* segments = nullptr;
  int n_segments = 0;
  int head_dim = 0;                          // D
  int rot_dim = 0;                           // padded dim of rotated segments (multiple of the rotation block)
  const RandomizedHadamard* rotation = nullptr;
  float scale = 1.0f;
  // Queries: row r (0-based in the call) of head hq is q[r * q_stride + hq * D].
  const float* q = nullptr;
  float* out = nullptr;                      // same layout as q
  size_t q_stride = 0;
  int pos = 0;                               // position of row 0
  int row_begin = 0, row_end = 0;            // rows handled by this job
  int head_begin = 0, n_heads = 0;           // query heads sharing this KV head
};

// Runs one job on the calling thread (uses thread-local scratch).
void attend_kv_head(const AttnHeadJob& job);

// Rows per job for a KV head shared by `group` query heads (keeps ≤ ~64 queries per job).
int attention_rows_per_job(int group);

// Fills `segs` (room for kMaxAttnSegments) with KV head `kv_head`'s stored rows in
// position order; returns how many segments it wrote.
constexpr int kMaxAttnSegments = 3;
using HeadSegmentsFn = std::function<int(int kv_head, AttnSegment* segs)>;

// Causal attention of the n query rows at positions [pos, pos + n) over every KV
// head: one attend_kv_head job per (KV head, block of rows) on the global thread
// pool. q/out are [n, n_heads * head_dim]; rotation/rot_dim serve rotated segments.
void attend_all_kv_heads(int n_heads, int n_kv_heads, int head_dim, int pos, int n, const float* q, float* out,
                         float scale, const RandomizedHadamard* rotation, int rot_dim, const HeadSegmentsFn& segments);

}  // namespace nextn
