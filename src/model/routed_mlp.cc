// model/routed_mlp.cc — dense and routed (Mixture of Experts) MLPs of any family.
//   router:  l = W_router · r  (r: router_in row), s = softmax(l) or sigmoid(l)
//   choice:  the top_k experts by s + correction_bias (bias only for the choice, GLM)
//   weights: w = s[chosen]; / Σ w when renormalize; · routed_scale; · per_expert_scale[e]
//   output:  y = Σ w_e · down_e(act(gate_e x) ⊙ up_e x) + σ(g · x) · shared(x)
// The rows of a batch are grouped by expert (counting sort over the chosen slots), so
// each chosen expert's matrices are streamed once per forward over all its rows. The
// pool runs (expert, block of output rows) items: pass 1 every gate/up projection of
// the layer (shared expert included, as one more group of all rows), pass 2 every down
// projection; each item is a single-threaded kernel call (matmul_outputs).
#include "model/routed_mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "util/error.h"
#include "util/thread_pool.h"

namespace nextn {

void gated_activation(bool gelu, const float* gate, const float* up, int64_t n, float* out) {
  if (gelu) geglu(gate, up, n, out);
  else swiglu(gate, up, n, out);
}

RoutedExperts::RoutedExperts(const MlpSpec& spec, int hidden, WeightStore& s, const std::string& p,
                             const RoutedNames& names)
    : spec_(spec), hidden_(hidden) {
  const int64_t E = spec.experts, H = hidden, I = spec.expert_intermediate;
  if (E <= 0 || spec.top_k <= 0 || spec.top_k > E || I <= 0)
    fail(ErrorKind::kBadInput, "{}: {} experts, top-{} and expert width {} do not make a routed MLP", p, E,
         spec.top_k, I);
  // The router runs in float32 whatever the checkpoint stores (GGUF files keep it F32 too):
  // top-k routing is discontinuous, so the rounding other matmuls give their activations
  // (int8 for quantized weights, bf16 on AVX3_ZEN4) must not be able to flip an expert.
  router_ = s.float_matrix(p + names.router + ".weight", E, H);
  const size_t before = s.matrix_bytes();
  if (spec.correction_bias) correction_bias_ = s.vector(p + names.router + ".e_score_correction_bias", E);
  if (spec.per_expert_scale) per_expert_scale_ = s.vector(p + names.per_expert_scale, E);

  const std::string x = p + names.experts;
  experts_.resize(size_t(E));
  if (s.has(x + ".gate_up_proj")) {  // fused (Qwen3.6, Gemma 4)
    WeightMatrix gate_up = s.stacked(x + ".gate_up_proj", E, 2 * I, H);
    WeightMatrix down = s.stacked(x + ".down_proj", E, H, I);
    for (int64_t e = 0; e < E; ++e) {
      experts_[size_t(e)].gate_up = slice_rows(gate_up, e * 2 * I, 2 * I);
      experts_[size_t(e)].down = slice_rows(down, e * H, H);
    }
  } else if (s.has(x + ".gate_proj")) {  // stacked but separate (GGUF ffn_{gate,up,down}_exps)
    WeightMatrix gate = s.stacked(x + ".gate_proj", E, I, H);
    WeightMatrix up = s.stacked(x + ".up_proj", E, I, H);
    WeightMatrix down = s.stacked(x + ".down_proj", E, H, I);
    for (int64_t e = 0; e < E; ++e) {
      experts_[size_t(e)].gate = slice_rows(gate, e * I, I);
      experts_[size_t(e)].up = slice_rows(up, e * I, I);
      experts_[size_t(e)].down = slice_rows(down, e * H, H);
    }
  } else {  // one tensor per expert (Qwen3-Next, GLM-4.5, DeepSeek)
    for (int64_t e = 0; e < E; ++e) {
      const std::string q = x + "." + std::to_string(e) + ".";
      experts_[size_t(e)].gate = s.matrix(q + "gate_proj.weight", I, H);
      experts_[size_t(e)].up = s.matrix(q + "up_proj.weight", I, H);
      experts_[size_t(e)].down = s.matrix(q + "down_proj.weight", H, I);
    }
  }
  const size_t experts_bytes = s.matrix_bytes() - before;
  expert_bytes_ = experts_bytes / size_t(E);

  const size_t shared_before = s.matrix_bytes();
  if (spec.shared_intermediate > 0) {
    const int64_t S = spec.shared_intermediate;
    shared_.gate = s.matrix(p + names.shared + ".gate_proj.weight", S, H);
    shared_.up = s.matrix(p + names.shared + ".up_proj.weight", S, H);
    shared_.down = s.matrix(p + names.shared + ".down_proj.weight", H, S);
    if (spec.shared_gate) shared_gate_ = s.matrix(p + names.shared_gate + ".weight", 1, H);
  }
  always_bytes_ = dtype_row_bytes(router_.dtype, H) * size_t(E) + (s.matrix_bytes() - shared_before);
  // A decode row streams top_k experts, not all of them.
  s.count_unread(size_t(E - spec.top_k) * expert_bytes_);
  expert_start_.resize(size_t(E) + 1);
}

void RoutedExperts::route(const float* router_in, int n) {
  const int64_t E = spec_.experts;
  const int K = spec_.top_k;
  const size_t nr = size_t(n);
  if (logits_.size() < nr * E) logits_.resize(nr * E);
  if (chosen_.size() < nr * K) chosen_.resize(nr * K), weight_.resize(nr * K);
  matmul(router_, router_in, n, logits_.data());

  std::vector<int32_t>& order = order_;
  std::vector<float>& choice = choice_;
  order.resize(size_t(E));
  choice.resize(size_t(E));
  for (size_t r = 0; r < nr; ++r) {
    float* sc = logits_.data() + r * E;  // scores in place of the logits
    if (spec_.scoring == RouterScoring::kSoftmax) {
      softmax(sc, E);
    } else {
      for (int64_t e = 0; e < E; ++e) sc[e] = 1.0f / (1.0f + std::exp(-sc[e]));
    }
    for (int64_t e = 0; e < E; ++e) choice[size_t(e)] = sc[e] + (correction_bias_ ? correction_bias_[e] : 0.0f);
    std::iota(order.begin(), order.end(), 0);
    // Highest first; equal scores: the lower expert index (as a stable sort does).
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
      return choice[size_t(a)] > choice[size_t(b)] || (choice[size_t(a)] == choice[size_t(b)] && a < b);
    });
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += sc[order[size_t(k)]];
    for (int k = 0; k < K; ++k) {
      const int32_t e = order[size_t(k)];
      float w = sc[e];
      if (spec_.renormalize) w /= sum;
      w *= spec_.routed_scale;
      if (per_expert_scale_) w *= per_expert_scale_[e];
      chosen_[r * K + size_t(k)] = e;
      weight_[r * K + size_t(k)] = w;
    }
  }

  // Group the (row, slot) pairs by expert: expert e's rows are
  // expert_rows_[expert_start_[e] .. expert_start_[e + 1]).
  std::fill(expert_start_.begin(), expert_start_.end(), 0);
  for (size_t i = 0; i < nr * K; ++i) ++expert_start_[size_t(chosen_[i]) + 1];
  for (int64_t e = 0; e < E; ++e) expert_start_[size_t(e) + 1] += expert_start_[size_t(e)];
  if (expert_rows_.size() < nr * K) expert_rows_.resize(nr * K), expert_weights_.resize(nr * K);
  std::vector<int32_t>& fill = fill_;
  fill.assign(expert_start_.begin(), expert_start_.end() - 1);
  for (size_t i = 0; i < nr * K; ++i) {
    const int32_t at = fill[size_t(chosen_[i])]++;
    expert_rows_[size_t(at)] = int32_t(i / size_t(K));
    expert_weights_[size_t(at)] = weight_[i];
  }
}

namespace {

// Splits w's output rows for one expert into blocks sized so that the pool gets a few
// items per thread (and whole decode / multi-row tiles).
void add_items(std::vector<ExpertWorkItem>& items, const WeightMatrix& w, const float* x, float* y, int32_t m,
               int64_t block) {
  for (int64_t o = 0; o < w.rows; o += block) items.push_back({&w, x, y, m, o, std::min(w.rows, o + block)});
}

void run_items(const std::vector<ExpertWorkItem>& items) {
  parallel_for(items.size(), [&](size_t begin, size_t end, int) {
    for (size_t i = begin; i < end; ++i) {
      const ExpertWorkItem& it = items[i];
      matmul_outputs(*it.w, it.x, it.m, it.y, it.o0, it.o1);
    }
  });
}

}  // namespace

void RoutedExperts::forward(const float* router_in, const float* x, int n, float* out) {
  const int64_t E = spec_.experts, H = hidden_, I = spec_.expert_intermediate;
  const int64_t S = spec_.shared_intermediate;
  const size_t nr = size_t(n);
  route(router_in, n);

  // The shared expert runs as one more group with every row (weight: its gate).
  const bool shared = S > 0;
  float* shared_gate = nullptr;
  if (shared && spec_.shared_gate) {
    shared_gate = BlockScratch::grow(gate_logit_, nr);
    matmul(shared_gate_, x, n, shared_gate);
    for (size_t r = 0; r < nr; ++r) shared_gate[r] = 1.0f / (1.0f + std::exp(-shared_gate[r]));
  }
  const size_t routed_rows = size_t(expert_start_[size_t(E)]);
  const size_t total = routed_rows + (shared ? nr : 0);
  const int64_t width = std::max(I, S);  // activation width per gathered row

  // Gather each expert's rows into one contiguous block (expert order), shared last.
  float* xe = BlockScratch::grow(xe_, total * H);
  for (size_t i = 0; i < routed_rows; ++i)
    std::memcpy(xe + i * H, x + size_t(expert_rows_[i]) * H, size_t(H) * sizeof(float));
  if (shared) std::memcpy(xe + routed_rows * H, x, nr * H * sizeof(float));
  float* h1 = BlockScratch::grow(h1_, total * 2 * width);
  float* h2 = BlockScratch::grow(h2_, total * width);
  float* ye = BlockScratch::grow(ye_, total * H);

  // Blocks of output rows: about 8 items per thread over this layer's work, in whole
  // tiles (multiples of 32 rows).
  uint64_t distinct = 0;
  int64_t out_rows = shared ? 3 * S : 0;
  for (int64_t e = 0; e < E; ++e)
    if (expert_start_[size_t(e) + 1] > expert_start_[size_t(e)]) ++distinct, out_rows += 3 * I;
  const int64_t per_block = out_rows / (8 * std::max(1, ThreadPool::global().size()));
  const int64_t block = std::max<int64_t>(32, (per_block + 31) / 32 * 32);

  // fn(expert, its width, first gathered row, rows) for every group with rows.
  auto groups = [&](auto&& fn) {
    for (int64_t e = 0; e < E; ++e) {
      const int32_t b = expert_start_[size_t(e)], m = expert_start_[size_t(e) + 1] - b;
      if (m > 0) fn(experts_[size_t(e)], I, size_t(b), m);
    }
    if (shared) fn(shared_, S, routed_rows, int32_t(n));
  };
  // Pass 1: the gate and up projections of every group, one pool dispatch.
  items_.clear();
  groups([&](const Expert& ex, int64_t, size_t b, int32_t m) {
    if (ex.gate_up.rows > 0) {  // fused [2I, H]: row r gives [gate (I) | up (I)]
      add_items(items_, ex.gate_up, xe + b * H, h1 + b * 2 * width, m, block);
    } else {
      add_items(items_, ex.gate, xe + b * H, h1 + b * 2 * width, m, block);
      add_items(items_, ex.up, xe + b * H, h2 + b * width, m, block);
    }
  });
  run_items(items_);
  // The activation (into h2), then pass 2: every down projection, one pool dispatch.
  items_.clear();
  groups([&](const Expert& ex, int64_t width_e, size_t b, int32_t m) {
    float* act = h2 + b * width;
    for (int32_t r = 0; r < m; ++r) {
      if (ex.gate_up.rows > 0) {
        const float* g = h1 + b * 2 * width + size_t(r) * 2 * width_e;
        gated_activation(spec_.gelu, g, g + width_e, width_e, act + size_t(r) * width_e);
      } else {
        gated_activation(spec_.gelu, h1 + b * 2 * width + size_t(r) * width_e, act + size_t(r) * width_e, width_e,
                         act + size_t(r) * width_e);
      }
    }
    add_items(items_, ex.down, act, ye + b * H, m, block);
  });
  run_items(items_);

  // Weighted sum into each row.
  std::fill_n(out, nr * H, 0.0f);
  for (size_t i = 0; i < total; ++i) {
    const bool is_shared = i >= routed_rows;
    const size_t row = is_shared ? i - routed_rows : size_t(expert_rows_[i]);
    const float w = is_shared ? (shared_gate ? shared_gate[row] : 1.0f) : expert_weights_[i];
    float* o = out + row * H;
    const float* yr = ye + i * H;
    for (int64_t j = 0; j < H; ++j) o[j] += w * yr[j];
  }
  stats_.forwards += 1;
  stats_.distinct_experts += uint64_t(distinct);
  stats_.rows += uint64_t(n);
}

FeedForward::FeedForward(const ModelConfig& c, const LayerSpec& l, WeightStore& s, const std::string& p)
    : hidden_(c.hidden_size), intermediate_(l.intermediate), eps_(float(c.rms_norm_eps)) {
  if (!l.mlp.routed()) {
    dense_ = load_mlp(s, p, hidden_, intermediate_, c.norm_offset);
    return;
  }
  dense_.norm = s.floats(p + "post_attention_layernorm.weight", {hidden_}, c.norm_offset);
  routed_ = std::make_unique<RoutedExperts>(l.mlp, hidden_, s, p, c.routed_names);
}

void FeedForward::add_routed_stats(RoutedStats& into) const {
  if (routed_) into += routed_->stats();
}

void FeedForward::forward(float* x, int n, BlockScratch& s) {
  if (!routed_) return run_mlp(dense_, hidden_, intermediate_, eps_, x, n, s);
  const size_t nr = size_t(n);
  float* xn = BlockScratch::grow(s.xn, nr * hidden_);
  float* y = BlockScratch::grow(s.proj, nr * hidden_);
  rms_norm(x, dense_.norm, n, hidden_, eps_, xn);
  routed_->forward(xn, xn, n, y);
  add_into(x, y, nr * hidden_);
}

}  // namespace nextn
