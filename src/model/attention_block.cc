// model/attention_block.cc — the shared decoder block (decoder_block.cc) as a Block
// over per-sequence states, and its shape from a layer's specification.
#include <utility>

#include "model/decoder_block.h"
#include "model/rope_table.h"
#include "model/routed_mlp.h"
#include "util/error.h"

namespace nextn {
namespace {

class AttentionBlock : public Block {
 public:
  AttentionBlock(BlockWeights w, const BlockShape& shape, std::vector<float> inv_freq,
                 std::unique_ptr<FeedForward> mlp = nullptr)
      : w_(w), shape_(shape), inv_freq_(std::move(inv_freq)), mlp_(std::move(mlp)) {}

  void add_routed_stats(RoutedStats& into) const override {
    if (mlp_) mlp_->add_routed_stats(into);
  }

  void forward(int layer, const BlockRows& rows, BlockScratch& s) override {
    // Every sequence's cache slot for this layer; the shared block appends and attends
    // over one layer index, identical across the sequences of an attention-only model.
    std::vector<KvSegment>& kv = s.kv_segments;
    kv.clear();
    int kv_layer = -1;
    for (const StateSegment& seg : rows.segments) {
      AttentionSlot slot = seg.state->attention(layer);
      if (!slot.owns) fail(ErrorKind::kUnsupported, "layer {}: the shared attention block cannot read another layer's KV", layer);
      if (kv_layer >= 0 && slot.layer != kv_layer)
        fail(ErrorKind::kInternal, "layer {}: sequences disagree on the cache layer ({} vs {})", layer, kv_layer, slot.layer);
      kv_layer = slot.layer;
      kv.push_back({slot.cache, seg.row0, seg.n, seg.pos});
    }
    if (kv_layer < 0) return;
    run_block(w_, shape_, inv_freq_.data(), kv_layer, rows.x, rows.n_rows, rows.positions, kv, s, mlp_.get());
  }

 private:
  BlockWeights w_;
  BlockShape shape_;
  std::vector<float> inv_freq_;
  std::unique_ptr<FeedForward> mlp_;  // routed layers: the MLP (w_ has no dense one)
};

}  // namespace

BlockShape attention_block_shape(const ModelConfig& config, const LayerSpec& layer) {
  BlockShape b;
  b.hidden = config.hidden_size;
  b.heads = layer.attention.heads;
  b.kv_heads = layer.attention.kv_heads;
  b.head_dim = layer.attention.head_dim;
  b.intermediate = layer.intermediate;
  b.qkv_bias = layer.attention.qkv_bias;
  b.qk_norm = layer.attention.qk_norm;
  b.rotary_dim = layer.attention.rotary_dim;
  b.eps = static_cast<float>(config.rms_norm_eps);
  return b;
}

BlockShape flat_block_shape(const ModelConfig& c) {
  BlockShape b;
  b.hidden = c.hidden_size;
  b.heads = c.num_heads;
  b.kv_heads = c.num_kv_heads;
  b.head_dim = c.head_dim;
  b.intermediate = c.intermediate_size;
  b.qkv_bias = c.qkv_bias;
  b.qk_norm = c.qk_norm;
  b.eps = static_cast<float>(c.rms_norm_eps);
  return b;
}

std::unique_ptr<Block> make_attention_block(WeightStore& store, const std::string& prefix, const BlockShape& shape,
                                            std::vector<float> inv_freq) {
  return std::make_unique<AttentionBlock>(load_block(store, prefix, shape), shape, std::move(inv_freq));
}

std::unique_ptr<Block> make_attention_block(const ModelConfig& config, const LayerSpec& layer, WeightStore& store,
                                            const std::string& prefix) {
  BlockShape shape = attention_block_shape(config, layer);
  const AttentionSpec& a = layer.attention;
  std::vector<float> inv_freq = rope_inv_freq(a.rotary_dim > 0 ? a.rotary_dim : a.head_dim, a.rope_theta,
                                              config.rope_scaling);
  if (!layer.mlp.routed()) return std::make_unique<AttentionBlock>(load_block(store, prefix, shape), shape, std::move(inv_freq));
  shape.intermediate = 0;  // no dense MLP: the routed one
  BlockWeights w = load_block(store, prefix, shape);
  auto mlp = std::make_unique<FeedForward>(config, layer, store, prefix);
  return std::make_unique<AttentionBlock>(w, shape, std::move(inv_freq), std::move(mlp));
}

}  // namespace nextn

namespace nextn {

MlpWeights load_mlp(WeightStore& s, const std::string& p, int hidden, int intermediate, float norm_offset) {
  MlpWeights w;
  w.norm = s.floats(p + "post_attention_layernorm.weight", {hidden}, norm_offset);
  w.gate = s.linear(p + "mlp.gate_proj", intermediate, hidden, false);
  w.up = s.linear(p + "mlp.up_proj", intermediate, hidden, false);
  w.down = s.linear(p + "mlp.down_proj", hidden, intermediate, false);
  return w;
}

void run_mlp(const MlpWeights& w, int hidden, int intermediate, float eps, float* x, int n_rows, BlockScratch& s) {
  const size_t rows = size_t(n_rows);
  float* xn = BlockScratch::grow(s.xn, rows * hidden);
  float* gate = BlockScratch::grow(s.gate, rows * intermediate);
  float* up = BlockScratch::grow(s.up, rows * intermediate);
  float* proj = BlockScratch::grow(s.proj, rows * hidden);
  rms_norm(x, w.norm, n_rows, hidden, eps, xn);
  apply_each(xn, n_rows, {{w.gate, gate}, {w.up, up}});
  swiglu(gate, up, int64_t(n_rows) * intermediate, gate);
  apply(w.down, gate, n_rows, proj);
  add_into(x, proj, rows * hidden);
}

}  // namespace nextn
