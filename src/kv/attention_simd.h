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

}  // namespace nextn
