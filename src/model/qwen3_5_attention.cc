// model/qwen3_5_attention.cc — Qwen3.5 gated full attention:
//   [q_h | gate_h] = q_proj(x) per head h (interleaved rows, not two halves),
//   q, k = RMSNorm1p per head (q_norm, k_norm), RoPE on the first rotary_dim dims of
//   each head (NeoX pairs (j, j + rotary_dim/2); M-RoPE's (t, h, w) per frequency slot
//   when the rows bring 3-axis positions), o = softmax(q kᵀ / √D) v,
//   y = o_proj(o ⊙ σ(gate)); then the layer's MLP (dense SwiGLU or routed experts:
//   routed_mlp.h). Attention runs on the layer's KV
//   slot in each sequence state, in any kv/ storage type.
#include <cmath>

#include "model/decoder_block.h"
#include "model/qwen3_5_layers.h"
#include "model/routed_mlp.h"
#include "model/rope_table.h"
#include "util/error.h"

namespace nextn {
namespace {

class GatedAttentionBlock : public Block {
 public:
  GatedAttentionBlock(const ModelConfig& c, const LayerSpec& layer, WeightStore& s, const std::string& p)
      : spec_(layer.attention), hidden_(c.hidden_size), intermediate_(layer.intermediate),
        eps_(float(c.rms_norm_eps)) {
    const int64_t H = hidden_, D = spec_.head_dim;
    const int64_t q_dim = int64_t(spec_.heads) * D, kv_dim = int64_t(spec_.kv_heads) * D;
    input_norm_ = s.floats(p + "input_layernorm.weight", {H}, c.norm_offset);
    q_ = s.linear(p + "self_attn.q_proj", 2 * q_dim, H, spec_.qkv_bias);
    k_ = s.linear(p + "self_attn.k_proj", kv_dim, H, spec_.qkv_bias);
    v_ = s.linear(p + "self_attn.v_proj", kv_dim, H, spec_.qkv_bias);
    o_ = s.linear(p + "self_attn.o_proj", H, q_dim, false);
    q_norm_ = s.floats(p + "self_attn.q_norm.weight", {D}, c.norm_offset);
    k_norm_ = s.floats(p + "self_attn.k_norm.weight", {D}, c.norm_offset);
    mlp_ = std::make_unique<FeedForward>(c, layer, s, p);
    inv_freq_ = rope_inv_freq(spec_.rotary_dim, spec_.rope_theta, RopeScaling{});
    if (!c.mrope_axes.empty() && int(c.mrope_axes.size()) != spec_.rotary_dim / 2)
      fail(ErrorKind::kInternal, "M-RoPE: {} slot axes for {} rotary dims", c.mrope_axes.size(), spec_.rotary_dim);
    mrope_axes_ = c.mrope_axes;
  }

  void add_routed_stats(RoutedStats& into) const override {
    if (mlp_) mlp_->add_routed_stats(into);
  }

  void forward(int layer, const BlockRows& rows, BlockScratch& s) override {
    const int n = rows.n_rows;
    const int64_t H = hidden_, D = spec_.head_dim, Hq = spec_.heads;
    const int64_t q_dim = Hq * D, kv_dim = int64_t(spec_.kv_heads) * D;
    const size_t nr = size_t(n);
    float* xn = BlockScratch::grow(s.xn, nr * H);
    float* qg = BlockScratch::grow(s.aux0, nr * 2 * q_dim);
    float* q = BlockScratch::grow(s.q, nr * q_dim);
    float* gate = BlockScratch::grow(s.aux1, nr * q_dim);
    float* k = BlockScratch::grow(s.k, nr * kv_dim);
    float* v = BlockScratch::grow(s.v, nr * kv_dim);
    float* attn = BlockScratch::grow(s.attn, nr * q_dim);
    float* proj = BlockScratch::grow(s.proj, nr * H);

    rms_norm(rows.x, input_norm_, n, H, eps_, xn);
    apply_each(xn, n, {{q_, qg}, {k_, k}, {v_, v}});
    // Per head: the first D values are the query, the next D its gate.
    for (size_t r = 0; r < nr; ++r)
      for (int64_t h = 0; h < Hq; ++h) {
        const float* src = qg + (r * Hq + h) * 2 * D;
        std::copy_n(src, D, q + (r * Hq + h) * D);
        std::copy_n(src + D, D, gate + (r * Hq + h) * D);
      }
    rms_norm(q, q_norm_, int64_t(n) * Hq, D, eps_, q);
    rms_norm(k, k_norm_, int64_t(n) * spec_.kv_heads, D, eps_, k);
    if (rows.axes && !mrope_axes_.empty()) {
      partial_mrope(q, n, int(Hq), int(D), spec_.rotary_dim, rows.axes, inv_freq_.data(), mrope_axes_.data());
      partial_mrope(k, n, spec_.kv_heads, int(D), spec_.rotary_dim, rows.axes, inv_freq_.data(), mrope_axes_.data());
    } else {  // text only: the three axes agree, M-RoPE is 1-D RoPE
      partial_rope(q, n, int(Hq), int(D), spec_.rotary_dim, rows.positions, inv_freq_.data());
      partial_rope(k, n, spec_.kv_heads, int(D), spec_.rotary_dim, rows.positions, inv_freq_.data());
    }
    const float scale = 1.0f / std::sqrt(float(D));
    for (const StateSegment& seg : rows.segments) {
      AttentionSlot slot = seg.state->attention(layer);
      if (slot.owns)
        slot.cache->append(slot.layer, seg.pos, seg.n, k + size_t(seg.row0) * kv_dim, v + size_t(seg.row0) * kv_dim);
      slot.cache->attend(slot.layer, seg.pos, seg.n, q + size_t(seg.row0) * q_dim, attn + size_t(seg.row0) * q_dim,
                         scale);
    }
    for (size_t i = 0; i < nr * q_dim; ++i) attn[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
    apply(o_, attn, n, proj);
    add_into(rows.x, proj, nr * H);
    mlp_->forward(rows.x, n, s);
  }

 private:
  AttentionSpec spec_;
  int hidden_, intermediate_;
  float eps_;
  const float* input_norm_ = nullptr;  // [H], 1 + w
  Linear q_;                           // [Hq * 2D, H]: rows [q_h0 | gate_h0 | q_h1 | gate_h1 | ...]
  Linear k_, v_;                       // [Hkv * D, H]
  Linear o_;                           // [H, Hq * D]
  const float* q_norm_ = nullptr;      // [D], 1 + w
  const float* k_norm_ = nullptr;      // [D], 1 + w
  std::unique_ptr<FeedForward> mlp_;  // dense or routed (LayerSpec::mlp)
  std::vector<float> inv_freq_;        // [rotary_dim / 2]
  std::vector<int8_t> mrope_axes_;     // [rotary_dim / 2] axis of each slot, or empty
};

}  // namespace

std::unique_ptr<Block> make_gated_attention_block(const ModelConfig& config, const LayerSpec& layer,
                                                  WeightStore& store, const std::string& prefix) {
  return std::make_unique<GatedAttentionBlock>(config, layer, store, prefix);
}

}  // namespace nextn
