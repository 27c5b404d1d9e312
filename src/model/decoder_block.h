// model/decoder_block.h — one pre-norm transformer decoder block (RMSNorm, GQA
// attention with RoPE over a KvCache, optional qkv bias and q/k norm, SwiGLU MLP),
// shared by every architecture's trunk layers and by the MTP layers.
#pragma once
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/block.h"
#include "model/config.h"
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
  int rotary_dim = 0;  // < head_dim: partial rotary (NeoX on the first rotary_dim dims); 0: the whole head
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

// The shape of the shared block for one attention layer of `config`.
BlockShape attention_block_shape(const ModelConfig& config, const LayerSpec& layer);
// The shape of the flat config's uniform layers (MiMo / DeepSeek MTP layers, assistants).
BlockShape flat_block_shape(const ModelConfig& config);

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
// Blocks of other kinds (model/qwen3_5_*.cc) use the same buffers under their own meaning.
struct BlockScratch {
  std::vector<float> xn, q, k, v, attn, proj, gate, up;
  std::vector<KvSegment> kv_segments;
  std::vector<float> aux0, aux1, aux2, aux3;  // for blocks that need more buffers
  void reserve(int rows, const BlockShape& shape);
  // Grows v to at least n floats and returns its data.
  static float* grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};

class FeedForward;

// x: [n_rows, hidden] residual stream, updated in place. positions: [n_rows].
// `mlp` set: it replaces the block's dense MLP (w.gate/up/down unused; a routed layer).
void run_block(const BlockWeights& w, const BlockShape& shape, const float* inv_freq, int kv_layer, float* x,
               int n_rows, const int32_t* positions, std::span<const KvSegment> segments, BlockScratch& scratch,
               FeedForward* mlp = nullptr);

// The shared block as a Block: attention over the layer's slot in each sequence state,
// RoPE from `inv_freq` (head_dim / 2 entries, or rotary_dim / 2 for partial rotary).
std::unique_ptr<Block> make_attention_block(WeightStore& store, const std::string& prefix, const BlockShape& shape,
                                            std::vector<float> inv_freq);
// The shared block for `layer` of `config`: its attention shape and RoPE, and its MLP
// as LayerSpec::mlp says (dense, or routed experts: routed_mlp.h).
std::unique_ptr<Block> make_attention_block(const ModelConfig& config, const LayerSpec& layer, WeightStore& store,
                                            const std::string& prefix);

// The pre-norm SwiGLU MLP with its residual: x += down(silu(gate(n)) * up(n)), n = RMSNorm(x).
struct MlpWeights {
  const float* norm = nullptr;  // post_attention_layernorm [hidden] (scale offset already added)
  Linear gate, up, down;        // [I, H], [I, H], [H, I]
};
MlpWeights load_mlp(WeightStore& store, const std::string& prefix, int hidden, int intermediate, float norm_offset);
void run_mlp(const MlpWeights& w, int hidden, int intermediate, float eps, float* x, int n_rows, BlockScratch& s);

// Linear layer over a batch of rows.
inline void apply(const Linear& l, const float* x, int64_t n_rows, float* y) { matmul(l.w, x, n_rows, y, l.bias); }

// Linear layers over the same rows (q, k and v; gate and up) in one pass (matmul_each).
struct LinearOutput {
  const Linear& l;
  float* y;
};
void apply_each(const float* x, int64_t n_rows, std::initializer_list<LinearOutput> outputs);

// y[i] += x[i].
void add_into(float* y, const float* x, size_t n);

}  // namespace nextn
