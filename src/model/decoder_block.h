// model/decoder_block.h — one pre-norm transformer decoder block (RMSNorm, GQA
// attention with RoPE over a KvCache, optional qkv bias and q/k norm, SwiGLU MLP),
// shared by every architecture's trunk layers and by the MTP layers.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/weights.h"

namespace nextn {

struct BlockShape {
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int intermediate = 0;
  bool qkv_bias = false;
  bool qk_norm = false;
  float eps = 1e-6f;
};

struct BlockWeights {
  const float* input_norm = nullptr;
  Linear q, k, v, o;
  const float* q_norm = nullptr;  // [head_dim], qk_norm only
  const float* k_norm = nullptr;
  const float* post_norm = nullptr;
  Linear gate, up, down;
};

// Binds `prefix`input_layernorm.weight, `prefix`self_attn.*, `prefix`mlp.* (prefix ends in '.').
BlockWeights load_block(WeightStore& store, const std::string& prefix, const BlockShape& shape);

// The rows of one sequence inside a block call: rows [row0, row0 + n) at positions
// [pos, pos + n), attending over `kv` (layer chosen per call).
struct KvSegment {
  KvCache* kv = nullptr;
  int row0 = 0;
  int n = 0;
  int pos = 0;
};

// Per-call scratch buffers; grown on demand, never shrunk (no allocation in steady state).
struct BlockScratch {
  std::vector<float> xn, q, k, v, attn, proj, gate, up;
  void reserve(int rows, const BlockShape& shape);
};

// x: [n_rows, hidden] residual stream, updated in place. positions: [n_rows].
void run_block(const BlockWeights& w, const BlockShape& shape, const float* inv_freq, int kv_layer, float* x,
               int n_rows, const int32_t* positions, std::span<const KvSegment> segments, BlockScratch& scratch);

// Linear layer over a batch of rows.
inline void apply(const Linear& l, const float* x, int64_t n_rows, float* y) { matmul(l.w, x, n_rows, y, l.bias); }

// y[i] += x[i].
void add_into(float* y, const float* x, size_t n);

}  // namespace nextn
