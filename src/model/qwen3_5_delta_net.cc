// model/qwen3_5_delta_net.cc — the Gated DeltaNet layer of Qwen3.5 (`linear_attn`):
//   u = in_proj_qkv(x) [q | k | v channels], z = in_proj_z(x), b = in_proj_b(x), a = in_proj_a(x)
//   c = silu(causal depthwise conv_K(u)) over the q, k and v channels, with the last
//       K−1 pre-conv rows of the sequence as conv state
//   q̂ = l2norm(q)·dk^-½, k̂ = l2norm(k) per key head; β = σ(b), g = −exp(A_log)·softplus(a + dt_bias)
//   per value head h (key head h / (Hv/Hk)), state S [dk, dv]:
//       S ← e^g S;  S ← S + k̂ (β (v − Sᵀk̂))ᵀ;  o = Sᵀq̂
//   y = out_proj( w ⊙ RMSNorm(o) ⊙ silu(z) )   (plain w here: the one norm without +1)
// then the layer's MLP (dense or routed: routed_mlp.h). Decode and speculative verify rows run the per-token rule
// (delta_rule.h: all of a sequence's rows in one pass over each head's state); a verify
// (snapshots) logs each row for rollback and writes only the state after its last row;
// longer prefills use the equivalent chunked form (chunks of 64 rows).
#include <algorithm>
#include <cmath>

#include "model/decoder_block.h"
#include "model/delta_rule.h"
#include "model/qwen3_5_layers.h"
#include "model/routed_mlp.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace nextn {
namespace {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

class GatedDeltaNetBlock : public Block {
 public:
  GatedDeltaNetBlock(const ModelConfig& c, const LayerSpec& layer, WeightStore& s, const std::string& p)
      : spec_(layer.delta_net), hidden_(c.hidden_size), intermediate_(layer.intermediate),
        eps_(float(c.rms_norm_eps)) {
    const DeltaNetSpec& d = spec_;
    const int64_t H = hidden_, C = d.conv_channels(), V = int64_t(d.value_heads) * d.value_dim;
    input_norm_ = s.floats(p + "input_layernorm.weight", {H}, c.norm_offset);
    const std::string a = p + "linear_attn.";
    in_qkv_ = s.linear(a + "in_proj_qkv", C, H, false);
    in_z_ = s.linear(a + "in_proj_z", V, H, false);
    in_b_ = s.linear(a + "in_proj_b", d.value_heads, H, false);
    in_a_ = s.linear(a + "in_proj_a", d.value_heads, H, false);
    const float* conv = s.floats(a + "conv1d.weight", {C, 1, d.conv_kernel});
    conv_taps_.resize(size_t(C) * d.conv_kernel);  // [K, C]: one tap's weights contiguous over channels
    for (int64_t c = 0; c < C; ++c)
      for (int j = 0; j < d.conv_kernel; ++j) conv_taps_[size_t(j) * size_t(C) + size_t(c)] = conv[c * d.conv_kernel + j];
    dt_bias_ = s.floats(a + "dt_bias", {d.value_heads});
    const float* a_log = s.floats(a + "A_log", {d.value_heads});
    neg_a_.resize(size_t(d.value_heads));
    for (int h = 0; h < d.value_heads; ++h) neg_a_[size_t(h)] = -std::exp(a_log[h]);
    norm_ = s.floats(a + "norm.weight", {d.value_dim});  // plain w: no offset
    out_ = s.linear(a + "out_proj", H, V, false);
    mlp_ = std::make_unique<FeedForward>(c, layer, s, p);
  }

  void add_routed_stats(RoutedStats& into) const override {
    if (mlp_) mlp_->add_routed_stats(into);
  }

  void forward(int layer, const BlockRows& rows, BlockScratch& s) override {
    const DeltaNetSpec& d = spec_;
    const int n = rows.n_rows;
    const size_t nr = size_t(n), H = size_t(hidden_), C = size_t(d.conv_channels());
    const size_t V = size_t(d.value_heads) * d.value_dim, Hv = size_t(d.value_heads);
    float* xn = BlockScratch::grow(s.xn, nr * H);
    float* u = BlockScratch::grow(s.aux0, nr * C);   // pre-conv q|k|v, then post-conv
    float* z = BlockScratch::grow(s.aux1, nr * V);
    float* ab = BlockScratch::grow(s.aux2, nr * 2 * Hv);  // [b | a] per row -> [beta | g]
    float* o = BlockScratch::grow(s.attn, nr * V);
    float* proj = BlockScratch::grow(s.proj, nr * H);
    float* b = BlockScratch::grow(s.q, nr * Hv);
    float* a = BlockScratch::grow(s.k, nr * Hv);

    rms_norm(rows.x, input_norm_, n, int64_t(H), eps_, xn);
    apply_each(xn, n, {{in_qkv_, u}, {in_z_, z}, {in_b_, b}, {in_a_, a}});
    for (size_t r = 0; r < nr; ++r)
      for (size_t h = 0; h < Hv; ++h) {
        ab[r * 2 * Hv + h] = sigmoid(b[r * Hv + h]);
        ab[r * 2 * Hv + Hv + h] = neg_a_[h] * softplus(a[r * Hv + h] + dt_bias_[h]);
      }
    for (const StateSegment& seg : rows.segments)
      if (seg.n > 0) mix(seg, seg.state->recurrent(layer), u, ab, o, s);
    // Gated norm per value head, then the output projection.
    rms_norm(o, norm_, int64_t(n) * d.value_heads, d.value_dim, eps_, o);
    swiglu(z, o, int64_t(nr * V), o);  // o ⊙ silu(z)
    apply(out_, o, n, proj);
    add_into(rows.x, proj, nr * H);
    mlp_->forward(rows.x, n, s);
  }

 private:
  // One sequence's rows: conv with its window, q/k normalization, then the rule per head.
  // The state to start from is the state's plane with its replay rows re-applied (rows
  // a rollback kept: state/recurrent_state.h), which go into the plane in place; with
  // snapshots every row is logged and the plane is left there, else the forward's rows
  // go into it too.
  void mix(const StateSegment& seg, RecurrentState& rs, float* u_all, const float* ab_all, float* o_all,
           BlockScratch& s) {
    const DeltaNetSpec& d = spec_;
    const int K = d.conv_kernel, n = seg.n, p = rs.replay_rows();
    const size_t C = size_t(d.conv_channels()), Hv = size_t(d.value_heads), V = Hv * d.value_dim;
    const size_t key = size_t(d.key_heads) * d.key_dim;
    const size_t S_floats = d.state_floats();
    // A logged row: [k̂ (key) | v (V) | β (Hv) | α (Hv) | pre-conv q|k|v (C)].
    const size_t rec_v = key, rec_beta = key + V, rec_alpha = rec_beta + Hv, rec_u = rec_alpha + Hv;
    float* u = u_all + size_t(seg.row0) * C;
    const float* ab = ab_all + size_t(seg.row0) * 2 * Hv;
    float* o = o_all + size_t(seg.row0) * V;
    float* plane = rs.plane();

    // ext = [window (K−1 rows) | replayed rows | the rows], pre-conv; the conv of row t
    // reads ext rows p + t .. p + t + K−1.
    float* ext = BlockScratch::grow(s.aux3, size_t(K - 1 + p + n) * C);
    std::copy_n(plane + S_floats, size_t(K - 1) * C, ext);
    for (int i = 0; i < p; ++i) std::copy_n(rs.replayed_record(i) + rec_u, C, ext + size_t(K - 1 + i) * C);
    std::copy_n(u, size_t(n) * C, ext + size_t(K - 1 + p) * C);
    // The window the plane keeps: after the replayed rows (snapshots), or after all rows.
    const int window_end = seg.snapshots ? p : p + n;
    std::copy_n(ext + size_t(window_end) * C, size_t(K - 1) * C, plane + S_floats);
    conv_silu(ext + size_t(p) * C, conv_taps_.data(), n, int64_t(C), K, u);
    // The rest runs per key head, over the pool: its q and k rows normalized, its share
    // of the row logs written, then the rule for each value head reading it. (On the
    // engine thread alone, normalizing and logging a 4-row verify of the Qwen3.5-0.8B
    // shape took ~0.4 ms a step while the pool waited.)
    const int group = d.value_heads / d.key_heads;
    const size_t state_head = size_t(d.key_dim) * d.value_dim;
    const bool chunked = !seg.snapshots && n > 1;
    const float q_scale = 1.0f / std::sqrt(float(d.key_dim));
    parallel_for(size_t(d.key_heads), [&](size_t k0, size_t k1, int) {
      thread_local DeltaChunkScratch cs;
      thread_local std::vector<DeltaRow> rows;  // replayed, then the forward's
      for (size_t kh = k0; kh < k1; ++kh) {
        const size_t q_at = kh * d.key_dim, k_at = key + kh * d.key_dim;
        // l2-normalize the head's q and k in every row (q also scaled by dk^-½).
        for (int t = 0; t < n; ++t)
          for (const size_t at : {q_at, k_at}) {
            float* x = u + size_t(t) * C + at;
            float ss = 0.0f;
            for (int i = 0; i < d.key_dim; ++i) ss += x[i] * x[i];
            const float f = (at == q_at ? q_scale : 1.0f) / std::sqrt(ss + 1e-6f);
            for (int i = 0; i < d.key_dim; ++i) x[i] *= f;
          }
        for (int g = 0; g < group; ++g) {
          const size_t h = d.tiled_value_heads ? kh + size_t(g) * size_t(d.key_heads) : kh * size_t(group) + size_t(g);
          const size_t v_at = 2 * key + h * d.value_dim;
          if (seg.snapshots)
            for (int t = 0; t < n; ++t) {
              float* rec = rs.record(t);
              const float* row = u + size_t(t) * C;
              const float* pre = ext + size_t(K - 1 + p + t) * C;
              if (g == 0) {  // the key head's share: k̂, and q and k before the conv
                std::copy_n(row + k_at, d.key_dim, rec + kh * d.key_dim);
                std::copy_n(pre + q_at, d.key_dim, rec + rec_u + q_at);
                std::copy_n(pre + k_at, d.key_dim, rec + rec_u + k_at);
              }
              std::copy_n(row + v_at, d.value_dim, rec + rec_v + h * d.value_dim);
              std::copy_n(pre + v_at, d.value_dim, rec + rec_u + v_at);
              rec[rec_beta + h] = ab[size_t(t) * 2 * Hv + h];
              rec[rec_alpha + h] = std::exp(ab[size_t(t) * 2 * Hv + Hv + h]);
            }
          // The replayed rows (state only) end in the plane, then the forward's rows (with
          // outputs) too, or nowhere with snapshots: one pass over the state for both.
          float* S = plane + h * state_head;
          float* S_out = seg.snapshots ? nullptr : S;
          rows.resize(size_t(p));
          for (int i = 0; i < p; ++i) {
            const float* rec = rs.replayed_record(i);
            rows[size_t(i)] = {nullptr, rec + kh * d.key_dim, rec + rec_v + h * d.value_dim, rec[rec_alpha + h],
                               rec[rec_beta + h], nullptr};
          }
          const float* q = u + q_at;
          const float* k = u + k_at;
          const float* v = u + v_at;
          float* y = o + h * d.value_dim;
          if (chunked) {  // in place, then the chunked form
            delta_rule_rows(S, S, rows.data(), p, d.key_dim, d.value_dim);
            chunked_delta_rule(S, q, k, v, C, ab + h, ab + Hv + h, 2 * Hv, n, kDeltaNetChunk, d.key_dim,
                               d.value_dim, y, V, cs);
            continue;
          }
          for (int t = 0; t < n; ++t) {
            const size_t r = size_t(t);
            rows.push_back({q + r * C, k + r * C, v + r * C, std::exp(ab[r * 2 * Hv + Hv + h]), ab[r * 2 * Hv + h], y + r * V});
          }
          delta_rule_rows(S, S, p, S_out, rows.data(), p + n, d.key_dim, d.value_dim);
        }
      }
    });
  }

  DeltaNetSpec spec_;
  int hidden_, intermediate_;
  float eps_;
  const float* input_norm_ = nullptr;  // [H], 1 + w
  Linear in_qkv_;                      // [2·Hk·dk + Hv·dv, H]: rows q | k | v, head-major
  Linear in_z_;                        // [Hv·dv, H], the output gate
  Linear in_b_;                        // [Hv, H] -> β = σ(b)
  Linear in_a_;                        // [Hv, H] -> decay input a
  std::vector<float> conv_taps_;       // [K, conv channels] (the checkpoint's [C, 1, K]); tap K−1 multiplies the current row
  const float* dt_bias_ = nullptr;     // [Hv]
  std::vector<float> neg_a_;           // [Hv] −exp(A_log)
  const float* norm_ = nullptr;        // [dv], plain w
  Linear out_;                         // [H, Hv·dv]
  std::unique_ptr<FeedForward> mlp_;  // dense or routed (LayerSpec::mlp)
};

}  // namespace

std::unique_ptr<Block> make_gated_delta_net_block(const ModelConfig& config, const LayerSpec& layer,
                                                  WeightStore& store, const std::string& prefix) {
  return std::make_unique<GatedDeltaNetBlock>(config, layer, store, prefix);
}

}  // namespace nextn
