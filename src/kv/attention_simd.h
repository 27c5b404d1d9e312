// kv/attention_simd.h — SIMD building blocks of attention over a stored KV cache
// (Highway, run-time dispatch): format conversion of cache rows and one
// online-softmax step of one query against a block of keys/values. Single-threaded;
// the caches parallelize over heads and rows themselves.
#pragma once
#include <cstddef>

#include "util/dtype.h"

namespace nextn {

// dst[i] = float(src[i]) for a stored F32/F16/BF16 array.
void kv_load_f32(DType dtype, const void* src, size_t n, float* dst);
// dst[i] = stored(src[i]) (F16/BF16 round to nearest even).
void kv_store(DType dtype, const float* src, size_t n, void* dst);

// Online softmax state of one query row: running max m, running sum l and
// un-normalized output acc[head_dim].
// Folds keys k[t], values v[t] (t < count, rows of head_dim floats) into the state:
// s_t = scale * <q, k_t>; acc = acc * e^(m - m') + sum_t e^(s_t - m') v_t; l likewise.
// scores: scratch of at least `count` floats.
void attend_block(const float* q, const float* k, const float* v, int count, int head_dim, float scale,
                  float* scores, float* m, float* l, float* acc);
// attend_block for the nq queries of a GQA group (q + j * head_dim, with state m[j], l[j],
// acc + j * head_dim) over rows as stored (dtype F32, F16 or BF16), read in place: each
// key and value row is loaded once for the group and promoted to float inside the dot
// products and the value sums, in attend_block's order, so each query's result is
// bit-identical to kv_load_f32 of the rows followed by attend_block for that query alone
// (the promotion is exact). scores: scratch of nq * count floats. next_k / next_v (or
// null): the rows read next, next_count of each, prefetched meanwhile so the KV stream
// keeps the memory busy.
void attend_block_stored(DType dtype, const float* q, int nq, const void* k, const void* v, int count,
                         int head_dim, float scale, float* scores, float* m, float* l, float* acc, const void* next_k,
                         const void* next_v, int next_count);

// Many queries (prefill rows x GQA group) against one block at once. kt: the block's keys
// transposed, kt[d * stride + t], zero padded to `stride` (a multiple of attention_lanes()).
// Query j uses qs[j], m[j], l[j], accs[j] and sees keys [0, visible[j]) of the block;
// scores: scratch of 4 * stride floats.
void attend_block_multi(const float* const* qs, int nq, const float* kt, int stride, const float* v, int count,
                        int head_dim, float scale, const int* visible, float* scores, float* m, float* l,
                        float* const* accs);
// Many queries against one block stored row by row (as attend_block reads it, count <= 64
// keys), query j seeing keys [lo[j], hi[j]) of the block (lo >= hi: none). Each query's
// m, l and acc end bit-identical to attend_block(qs[j], k + lo[j] * head_dim,
// v + lo[j] * head_dim, hi[j] - lo[j], ...); key and value loads are shared by up to four
// queries. scores: scratch of 4 * 64 floats.
void attend_block_rows(const float* const* qs, int nq, const float* k, const float* v, int head_dim, float scale,
                       const int* lo, const int* hi, float* scores, float* m, float* l, float* const* accs);
// Float lanes of the SIMD target chosen at run time.
size_t attention_lanes();

}  // namespace nextn
