// model/gemma4_layer.cc — one Gemma 4 decoder layer (as Hugging Face's Gemma 4 text model computes it):
//   q = RoPE(RMSNorm_w(q_proj(n); q_norm)),  n = RMSNorm_w(x; input_layernorm)
//   k = RoPE(RMSNorm_w(k_proj(n); k_norm)),  v = RMSNorm(v_proj(n) or, K=V, the raw k_proj(n)) without weight
//   x += RMSNorm_w(o_proj(softmax(q kᵀ · 1.0) v); post_attention_layernorm)
//   x += RMSNorm_w(down(gelu_tanh(gate(m)) ⊙ up(m)); post_feedforward_layernorm), m = RMSNorm_w(x; pre_feedforward_layernorm)
//   PLE: x += RMSNorm_w(per_layer_projection(gelu_tanh(per_layer_input_gate(x)) ⊙ ple_layer); post_per_layer_input_norm)
//   x *= layer_scalar
// 26B-A4B (LayerSpec::mlp routed; docs/architectures.md, Gemma 4): the dense MLP above ends in post_feedforward_layernorm_1
// and runs beside routed experts (routed_mlp.h; GeGLU, fused experts.gate_up_proj):
//   m2 = RMSNorm_w(Σ_e w_e expert_e(RMSNorm_w(x; pre_feedforward_layernorm_2)); post_feedforward_layernorm_2),
//   router over RMSNorm(x) ⊙ router.scale · H^-1/2 (no weight of its own), top-k renormalised,
//   w_e · router.per_expert_scale[e]; x += RMSNorm_w(m1 + m2; post_feedforward_layernorm)
// Sliding layers attend over their window (the cache's shape holds it); KV-sharing
// layers and the assistant's layers are query-only and read another layer's slot. On a
// use_bidirectional_attention "vision" model the sliding layers let the rows of one
// image see each other (allowed(q, k) = (k ≤ q or same image) and k > q − window); full
// layers stay causal.
#include <algorithm>
#include <cmath>

#include "model/decoder_block.h"
#include "model/gemma4_layers.h"
#include "model/rope_table.h"
#include "model/routed_mlp.h"
#include "util/error.h"

namespace nextn {

namespace {

class Gemma4Layer : public Block {
 public:
  Gemma4Layer(const LayerSpec& layer, const Gemma4BlockOptions& o, WeightStore& s, const std::string& p)
      : spec_(layer.attention), o_(o), intermediate_(layer.intermediate) {
    const int64_t H = o.hidden, D = spec_.head_dim;
    const int64_t q_dim = int64_t(spec_.heads) * D, kv_dim = int64_t(spec_.kv_heads) * D;
    input_norm_ = s.floats(p + "input_layernorm.weight", {H});
    q_ = s.linear(p + "self_attn.q_proj", q_dim, H, false);
    o_proj_ = s.linear(p + "self_attn.o_proj", H, q_dim, false);
    q_norm_ = s.floats(p + "self_attn.q_norm.weight", {D});
    if (!o.query_only) {
      k_ = s.linear(p + "self_attn.k_proj", kv_dim, H, false);
      if (!spec_.value_is_key) v_ = s.linear(p + "self_attn.v_proj", kv_dim, H, false);
      k_norm_ = s.floats(p + "self_attn.k_norm.weight", {D});
    }
    post_attention_norm_ = s.floats(p + "post_attention_layernorm.weight", {H});
    pre_feedforward_norm_ = s.floats(p + "pre_feedforward_layernorm.weight", {H});
    post_feedforward_norm_ = s.floats(p + "post_feedforward_layernorm.weight", {H});
    gate_ = s.linear(p + "mlp.gate_proj", intermediate_, H, false);
    up_ = s.linear(p + "mlp.up_proj", intermediate_, H, false);
    down_ = s.linear(p + "mlp.down_proj", H, intermediate_, false);
    if (layer.mlp.routed()) {
      routed_ = std::make_unique<RoutedExperts>(layer.mlp, int(H), s, p, o.routed_names);
      dense_norm_ = s.floats(p + "post_feedforward_layernorm_1.weight", {H});
      pre_routed_norm_ = s.floats(p + "pre_feedforward_layernorm_2.weight", {H});
      post_routed_norm_ = s.floats(p + "post_feedforward_layernorm_2.weight", {H});
      // The router's input is RMSNorm(x) (no weight) ⊙ router.scale · H^-1/2: one scale vector.
      const float* scale = s.floats(p + "router.scale", {H});
      router_scale_.resize(size_t(H));
      for (int64_t i = 0; i < H; ++i) router_scale_[size_t(i)] = scale[i] / std::sqrt(float(H));
    }
    layer_scalar_ = *s.floats(p + "layer_scalar", {1});
    if (o.per_layer_input > 0) {
      ple_gate_ = s.linear(p + "per_layer_input_gate", o.per_layer_input, H, false);
      ple_projection_ = s.linear(p + "per_layer_projection", H, o.per_layer_input, false);
      ple_norm_ = s.floats(p + "post_per_layer_input_norm.weight", {H});
    }
    ones_.assign(size_t(D), 1.0f);
    inv_freq_ = rope_inv_freq(int(D), spec_.rope_theta, RopeScaling{});
    if (spec_.rotary_pairs > 0)
      for (size_t i = size_t(spec_.rotary_pairs); i < inv_freq_.size(); ++i) inv_freq_[i] = 0.0f;  // identity pairs
  }

  void add_routed_stats(RoutedStats& into) const override {
    if (routed_) into += routed_->stats();
  }

  void forward(int layer, const BlockRows& rows, BlockScratch& s) override {
    const int n = rows.n_rows;
    const size_t nr = size_t(n);
    const int64_t H = o_.hidden, D = spec_.head_dim, Hq = spec_.heads, KV = spec_.kv_heads;
    const int64_t q_dim = Hq * D, kv_dim = KV * D;
    float* xn = BlockScratch::grow(s.xn, nr * H);
    float* q = BlockScratch::grow(s.q, nr * q_dim);
    float* attn = BlockScratch::grow(s.attn, nr * q_dim);
    float* proj = BlockScratch::grow(s.proj, nr * H);

    rms_norm(rows.x, input_norm_, n, H, o_.eps, xn);
    float* k = nullptr;
    float* v = nullptr;
    if (o_.query_only) {
      apply(q_, xn, n, q);
    } else {
      k = BlockScratch::grow(s.k, nr * kv_dim);
      v = BlockScratch::grow(s.v, nr * kv_dim);
      if (spec_.value_is_key) {
        apply_each(xn, n, {{q_, q}, {k_, k}});
        std::copy_n(k, nr * kv_dim, v);  // K=V: the value is the key projection before k_norm / RoPE
      } else {
        apply_each(xn, n, {{q_, q}, {k_, k}, {v_, v}});
      }
    }
    rms_norm(q, q_norm_, int64_t(n) * Hq, D, o_.eps, q);
    rope(q, n, Hq, D, rows.positions, inv_freq_.data());
    if (!o_.query_only) {
      rms_norm(k, k_norm_, int64_t(n) * KV, D, o_.eps, k);
      rope(k, n, KV, D, rows.positions, inv_freq_.data());
      rms_norm(v, ones_.data(), int64_t(n) * KV, D, o_.eps, v);
    }
    for (const StateSegment& seg : rows.segments) {
      AttentionSlot slot = seg.state->attention(layer);
      if (slot.owns && !seg.read_only) {
        if (o_.query_only) fail(ErrorKind::kInternal, "layer {}: a query-only Gemma 4 layer owns KV", layer);
        slot.cache->append(slot.layer, seg.pos, seg.n, k + size_t(seg.row0) * kv_dim, v + size_t(seg.row0) * kv_dim);
      }
      attend(*slot.cache, slot.layer, seg, image_key_ends(rows, seg), q + size_t(seg.row0) * q_dim,
             attn + size_t(seg.row0) * q_dim, s);
    }
    apply(o_proj_, attn, n, proj);
    rms_norm(proj, post_attention_norm_, n, H, o_.eps, proj);
    add_into(rows.x, proj, nr * H);

    float* gate = BlockScratch::grow(s.gate, nr * intermediate_);
    float* up = BlockScratch::grow(s.up, nr * intermediate_);
    rms_norm(rows.x, pre_feedforward_norm_, n, H, o_.eps, xn);
    apply_each(xn, n, {{gate_, gate}, {up_, up}});
    geglu(gate, up, int64_t(nr) * intermediate_, gate);
    apply(down_, gate, n, proj);
    if (routed_) {
      // Dense and routed branches, each normed, summed, then the shared post-norm.
      rms_norm(proj, dense_norm_, n, H, o_.eps, proj);
      float* router_in = BlockScratch::grow(s.aux0, nr * H);
      float* routed = BlockScratch::grow(s.aux1, nr * H);
      rms_norm(rows.x, router_scale_.data(), n, H, o_.eps, router_in);
      rms_norm(rows.x, pre_routed_norm_, n, H, o_.eps, xn);
      routed_->forward(router_in, xn, n, routed);
      rms_norm(routed, post_routed_norm_, n, H, o_.eps, routed);
      add_into(proj, routed, nr * H);
    }
    rms_norm(proj, post_feedforward_norm_, n, H, o_.eps, proj);
    add_into(rows.x, proj, nr * H);

    if (o_.per_layer_input > 0) {
      if (!rows.layer_inputs) fail(ErrorKind::kInternal, "layer {}: no per-layer inputs", layer);
      const int64_t P = o_.per_layer_input;
      float* g = BlockScratch::grow(s.aux0, nr * P);
      apply(ple_gate_, rows.x, n, g);
      for (size_t r = 0; r < nr; ++r) {
        const float* ple = rows.layer_inputs + r * size_t(rows.layer_input_stride) + size_t(layer) * P;
        geglu(g + r * P, ple, P, g + r * P);
      }
      apply(ple_projection_, g, n, proj);
      rms_norm(proj, ple_norm_, n, H, o_.eps, proj);
      add_into(rows.x, proj, nr * H);
    }
    for (size_t i = 0; i < nr * H; ++i) rows.x[i] *= layer_scalar_;
  }

 private:
  // Attention with scale 1.0 over `cache`. The cache's shape fixes the query heads per
  // KV head; a layer with another count (the assistant's layers read the target's
  // cache: E2B's assistant has 4 query heads, the target 8) runs in passes of the
  // cache's group size, its heads placed in the first slots of each group, the rest zero.
  // For a layer whose images see themselves, the segment's rows' key ends
  // (KvCache::attend_ahead: an image row sees up to its image's last row); null when
  // causal attention is all the segment needs.
  const int32_t* image_key_ends(const BlockRows& rows, const StateSegment& seg) {
    if (!o_.image_bidirectional || !rows.image_end) return nullptr;
    key_end_.assign(size_t(seg.n), -1);
    bool any = false;
    for (int r = 0; r < seg.n; ++r) {
      const int32_t end = rows.image_end[seg.row0 + r];
      if (end < 0) continue;
      if (end > seg.row0 + seg.n) fail(ErrorKind::kInternal, "an image runs past its sequence's rows");
      key_end_[size_t(r)] = seg.pos + (end - seg.row0);
      any = true;
    }
    return any ? key_end_.data() : nullptr;
  }

  void attend(const KvCache& cache, int kv_layer, const StateSegment& seg, const int32_t* key_end, const float* q,
              float* out, BlockScratch& s) const {
    if (key_end) {
      if (spec_.heads / spec_.kv_heads != cache.shape().n_heads / cache.shape().n_kv_heads)
        fail(ErrorKind::kInternal, "Gemma 4 layer: an image seeing itself through a cache of another head grouping");
      return cache.attend_ahead(kv_layer, seg.pos, seg.n, q, out, 1.0f, key_end);
    }
    const int D = spec_.head_dim, KV = spec_.kv_heads, mine = spec_.heads / KV;
    const int theirs = cache.shape().n_heads / cache.shape().n_kv_heads;
    if (cache.shape().n_kv_heads != KV || cache.shape().head_dim != D)
      fail(ErrorKind::kInternal, "Gemma 4 layer: cache of {} kv heads x {} for a layer of {} x {}",
           cache.shape().n_kv_heads, cache.shape().head_dim, KV, D);
    if (mine == theirs) return cache.attend(kv_layer, seg.pos, seg.n, q, out, 1.0f);
    const size_t padded = size_t(seg.n) * cache.shape().n_heads * D;
    float* pq = BlockScratch::grow(s.aux2, padded);
    float* po = BlockScratch::grow(s.aux3, padded);
    for (int first = 0; first < mine; first += theirs) {
      std::fill_n(pq, padded, 0.0f);
      for (int r = 0; r < seg.n; ++r)
        for (int g = 0; g < KV; ++g)
          for (int j = 0; j < theirs && first + j < mine; ++j)
            std::copy_n(q + ((size_t(r) * KV + g) * mine + first + j) * D, D, pq + ((size_t(r) * KV + g) * theirs + j) * D);
      cache.attend(kv_layer, seg.pos, seg.n, pq, po, 1.0f);
      for (int r = 0; r < seg.n; ++r)
        for (int g = 0; g < KV; ++g)
          for (int j = 0; j < theirs && first + j < mine; ++j)
            std::copy_n(po + ((size_t(r) * KV + g) * theirs + j) * D, D, out + ((size_t(r) * KV + g) * mine + first + j) * D);
    }
  }

  AttentionSpec spec_;
  Gemma4BlockOptions o_;
  int64_t intermediate_;
  const float* input_norm_ = nullptr;             // [H]
  Linear q_;                                      // [Hq * D, H]
  Linear k_, v_;                                  // [KV * D, H] (none when query-only; no v_ when K=V)
  Linear o_proj_;                                 // [H, Hq * D]
  const float* q_norm_ = nullptr;                 // [D]
  const float* k_norm_ = nullptr;                 // [D]
  const float* post_attention_norm_ = nullptr;    // [H]
  const float* pre_feedforward_norm_ = nullptr;   // [H]
  const float* post_feedforward_norm_ = nullptr;  // [H]
  Linear gate_, up_;                              // [I, H]
  Linear down_;                                   // [H, I]
  std::unique_ptr<RoutedExperts> routed_;         // 26B-A4B: experts beside the dense MLP
  const float* dense_norm_ = nullptr;             // post_feedforward_layernorm_1 [H]
  const float* pre_routed_norm_ = nullptr;        // pre_feedforward_layernorm_2 [H]
  const float* post_routed_norm_ = nullptr;       // post_feedforward_layernorm_2 [H]
  std::vector<float> router_scale_;               // router.scale / sqrt(H) [H]
  float layer_scalar_ = 1.0f;                     // layer_scalar [1]
  Linear ple_gate_;                               // per_layer_input_gate [P, H]
  Linear ple_projection_;                         // per_layer_projection [H, P]
  const float* ple_norm_ = nullptr;               // post_per_layer_input_norm [H]
  std::vector<float> ones_;                       // [D]: v_norm has no weight
  std::vector<float> inv_freq_;                   // [D / 2]; "proportional": zeros past rotary_pairs
  std::vector<int32_t> key_end_;                  // [segment rows]: image_key_ends' scratch
};

}  // namespace

std::unique_ptr<Block> make_gemma4_layer(const LayerSpec& layer, const Gemma4BlockOptions& options, WeightStore& store,
                                         const std::string& prefix) {
  return std::make_unique<Gemma4Layer>(layer, options, store, prefix);
}

}  // namespace nextn
