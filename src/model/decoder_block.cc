// model/decoder_block.cc — the shared decoder block.
#include "model/decoder_block.h"

#include <cmath>
#include <iterator>

#include "model/rope_table.h"
#include "model/routed_mlp.h"
#include "util/error.h"

namespace nextn {

BlockWeights load_block(WeightStore& s, const std::string& p, const BlockShape& sh) {
  BlockWeights w;
  const int64_t q_dim = int64_t(sh.heads) * sh.head_dim, kv_dim = int64_t(sh.kv_heads) * sh.head_dim;
  w.input_norm = s.vector(p + "input_layernorm.weight", sh.hidden);
  w.q = s.linear(p + "self_attn.q_proj", q_dim, sh.hidden, sh.qkv_bias);
  w.k = s.linear(p + "self_attn.k_proj", kv_dim, sh.hidden, sh.qkv_bias);
  w.v = s.linear(p + "self_attn.v_proj", kv_dim, sh.hidden, sh.qkv_bias);
  w.o = s.linear(p + "self_attn.o_proj", sh.hidden, q_dim, false);
  if (sh.qk_norm) {
    w.q_norm = s.vector(p + "self_attn.q_norm.weight", sh.head_dim);
    w.k_norm = s.vector(p + "self_attn.k_norm.weight", sh.head_dim);
  }
  w.post_norm = s.vector(p + "post_attention_layernorm.weight", sh.hidden);
  if (sh.intermediate == 0) return w;  // a routed MLP instead (FeedForward)
  w.gate = s.linear(p + "mlp.gate_proj", sh.intermediate, sh.hidden, false);
  w.up = s.linear(p + "mlp.up_proj", sh.intermediate, sh.hidden, false);
  w.down = s.linear(p + "mlp.down_proj", sh.hidden, sh.intermediate, false);
  return w;
}

void BlockScratch::reserve(int rows, const BlockShape& sh) {
  auto grow = [](std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  const size_t r = static_cast<size_t>(rows);
  grow(xn, r * sh.hidden);
  grow(q, r * sh.heads * sh.head_dim);
  grow(k, r * sh.kv_heads * sh.head_dim);
  grow(v, r * sh.kv_heads * sh.head_dim);
  grow(attn, r * sh.heads * sh.head_dim);
  grow(proj, r * sh.hidden);
  grow(gate, r * sh.intermediate);
  grow(up, r * sh.intermediate);
}

void apply_each(const float* x, int64_t n_rows, std::initializer_list<LinearOutput> outputs) {
  MatmulOutput each[8];
  if (outputs.size() > std::size(each)) fail(ErrorKind::kInternal, "apply_each: {} outputs", outputs.size());
  size_t n = 0;
  for (const LinearOutput& out : outputs) each[n++] = {&out.l.w, out.y, out.l.bias};
  matmul_each(std::span<const MatmulOutput>(each, n), x, n_rows);
}

void add_into(float* __restrict y, const float* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

void run_block(const BlockWeights& w, const BlockShape& sh, const float* inv_freq, int kv_layer, float* x, int n_rows,
               const int32_t* positions, std::span<const KvSegment> segments, BlockScratch& s, FeedForward* mlp) {
  s.reserve(n_rows, sh);
  const int64_t H = sh.hidden, D = sh.head_dim;
  const int64_t q_dim = sh.heads * D, kv_dim = sh.kv_heads * D;
  const size_t residual_n = static_cast<size_t>(n_rows) * H;

  // Attention.
  rms_norm(x, w.input_norm, n_rows, H, sh.eps, s.xn.data());
  apply_each(s.xn.data(), n_rows, {{w.q, s.q.data()}, {w.k, s.k.data()}, {w.v, s.v.data()}});
  if (sh.qk_norm) {
    rms_norm(s.q.data(), w.q_norm, int64_t(n_rows) * sh.heads, D, sh.eps, s.q.data());
    rms_norm(s.k.data(), w.k_norm, int64_t(n_rows) * sh.kv_heads, D, sh.eps, s.k.data());
  }
  if (sh.rotary_dim > 0 && sh.rotary_dim < D) {
    partial_rope(s.q.data(), n_rows, sh.heads, int(D), sh.rotary_dim, positions, inv_freq);
    partial_rope(s.k.data(), n_rows, sh.kv_heads, int(D), sh.rotary_dim, positions, inv_freq);
  } else {
    rope(s.q.data(), n_rows, sh.heads, D, positions, inv_freq);
    rope(s.k.data(), n_rows, sh.kv_heads, D, positions, inv_freq);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (const KvSegment& seg : segments) {
    seg.kv->append(kv_layer, seg.pos, seg.n, s.k.data() + seg.row0 * kv_dim, s.v.data() + seg.row0 * kv_dim);
    seg.kv->attend(kv_layer, seg.pos, seg.n, s.q.data() + seg.row0 * q_dim, s.attn.data() + seg.row0 * q_dim, scale);
  }
  apply(w.o, s.attn.data(), n_rows, s.proj.data());
  add_into(x, s.proj.data(), residual_n);

  // MLP.
  if (mlp) return mlp->forward(x, n_rows, s);
  rms_norm(x, w.post_norm, n_rows, H, sh.eps, s.xn.data());
  apply_each(s.xn.data(), n_rows, {{w.gate, s.gate.data()}, {w.up, s.up.data()}});
  swiglu(s.gate.data(), s.up.data(), int64_t(n_rows) * sh.intermediate, s.gate.data());
  apply(w.down, s.gate.data(), n_rows, s.proj.data());
  add_into(x, s.proj.data(), residual_n);
}

}  // namespace nextn
