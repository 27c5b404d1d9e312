// vision/gemma4_vision.cc — the Gemma 4 vision tower's forward pass, its pooler and
// projector, and the "gemma4" VisionEncoder.
#include "vision/gemma4_vision.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "io/checkpoint.h"
#include "vision/config_keys.h"
#include "io/json_file.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "vision/attention.h"

namespace nextn::vision {

namespace {

void clamp_all(float* x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; ++i) x[i] = std::clamp(x[i], lo, hi);
}

}  // namespace

Gemma4VisionConfig Gemma4VisionConfig::from_json(const nlohmann::json& j, int text_hidden) {
  if (!j.is_object()) fail(ErrorKind::kBadInput, "vision_config: expected an object");
  Gemma4VisionConfig c;
  c.depth = config_int(j, "num_hidden_layers", c.depth);
  c.hidden = config_int(j, "hidden_size", c.hidden);
  c.heads = config_int(j, "num_attention_heads", c.heads);
  c.head_dim = config_int(j, "head_dim", c.head_dim);
  c.intermediate = config_int(j, "intermediate_size", c.intermediate);
  c.patch_size = config_int(j, "patch_size", c.patch_size);
  c.pooling_kernel_size = config_int(j, "pooling_kernel_size", c.pooling_kernel_size);
  c.position_embedding_size = config_int(j, "position_embedding_size", c.position_embedding_size);
  c.standardize = config_bool(j, "standardize");
  c.out_hidden = text_hidden;
  if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number()) c.eps = j["rms_norm_eps"].get<float>();
  if (config_int(j, "num_key_value_heads", c.heads) != c.heads)
    fail(ErrorKind::kUnsupported, "vision_config.num_key_value_heads: grouped-query attention in the vision tower is not supported");
  if (j.contains("hidden_activation") && j["hidden_activation"] != "gelu_pytorch_tanh")
    fail(ErrorKind::kUnsupported, "vision_config.hidden_activation: only gelu_pytorch_tanh is supported");
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const auto& rp = j["rope_parameters"];
    if (rp.contains("rope_type") && rp["rope_type"] != "default")
      fail(ErrorKind::kUnsupported, "vision_config.rope_parameters.rope_type: only 'default' is supported");
    if (rp.contains("rope_theta") && rp["rope_theta"].is_number()) c.rope_theta = rp["rope_theta"].get<double>();
  }
  if (c.head_dim % 4 != 0)
    fail(ErrorKind::kBadInput, "vision_config.head_dim: {} is not divisible by 4 (two rotary halves of pairs)", c.head_dim);
  if (!(c.rope_theta > 0)) fail(ErrorKind::kBadInput, "vision_config.rope_parameters.rope_theta must be positive");
  if (c.out_hidden < 1) fail(ErrorKind::kBadInput, "text_config.hidden_size: expected a positive integer");
  return c;
}

bool Gemma4VisionTower::Linear::clips_input() const { return std::isfinite(in_min) || std::isfinite(in_max); }
bool Gemma4VisionTower::Linear::clips_output() const { return std::isfinite(out_min) || std::isfinite(out_max); }

std::unique_ptr<Gemma4VisionTower> Gemma4VisionTower::load(const Checkpoint& ckpt, const std::string& prefix) {
  const nlohmann::json& cfg = ckpt.config();
  if (!cfg.contains("vision_config"))
    fail(ErrorKind::kBadInput, "{}: config.json has no vision_config (not a vision-language checkpoint)", ckpt.dir());
  const nlohmann::json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  if (!text.contains("hidden_size") || !text["hidden_size"].is_number_integer())
    fail(ErrorKind::kBadInput, "{}: config.json has no text_config.hidden_size", ckpt.dir());
  auto t = std::unique_ptr<Gemma4VisionTower>(new Gemma4VisionTower());
  Gemma4VisionConfig& c = t->config_;
  c = Gemma4VisionConfig::from_json(cfg["vision_config"], text["hidden_size"].get<int>());
  const int64_t D = c.hidden, I = c.intermediate, p = c.patch_size, A = int64_t(c.heads) * c.head_dim;
  const std::string tower = prefix + "vision_tower.";

  auto vec = [&](const std::string& name, int64_t n) { return ckpt.require(name, {n}).floats(); };
  auto matrix = [&](const std::string& name, int64_t out, int64_t in) {
    const TensorView& v = ckpt.require(name, {out, in});
    return WeightMatrix{v.dtype, out, in, v.data};
  };
  // A clippable linear: NAME.linear.weight, and NAME.{input,output}_{min,max} scalars
  // (0-d, or 1 element in converted files) when the model clips.
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    Linear l;
    l.w = matrix(name + ".linear.weight", out, in);
    auto scalar = [&](const char* which, float& into) {
      const TensorView* v = ckpt.find(name + "." + which);
      if (!v) return;
      if (v->numel() != 1) fail(ErrorKind::kBadInput, "{}.{}: expected one value, got {}", name, which, v->numel());
      into = v->float_at(0);
    };
    scalar("input_min", l.in_min);
    scalar("input_max", l.in_max);
    scalar("output_min", l.out_min);
    scalar("output_max", l.out_max);
    if (!(l.in_min <= l.in_max) || !(l.out_min <= l.out_max))
      fail(ErrorKind::kBadInput, "{}: clamp bounds out of order (input [{}, {}], output [{}, {}])", name, l.in_min,
           l.in_max, l.out_min, l.out_max);
    return l;
  };

  t->input_proj_ = matrix(tower + "patch_embedder.input_proj.weight", D, 3 * p * p);
  const TensorView& table =
      ckpt.require(tower + "patch_embedder.position_embedding_table", {2, c.position_embedding_size, D});
  t->position_table_ = WeightMatrix{table.dtype, 2 * int64_t(c.position_embedding_size), D, table.data};
  for (int i = 0; i < c.depth; ++i) {
    const std::string b = tower + "encoder.layers." + std::to_string(i) + ".";
    Layer l;
    l.input_norm = vec(b + "input_layernorm.weight", D);
    l.q = linear(b + "self_attn.q_proj", A, D);
    l.k = linear(b + "self_attn.k_proj", A, D);
    l.v = linear(b + "self_attn.v_proj", A, D);
    l.o = linear(b + "self_attn.o_proj", D, A);
    l.q_norm = vec(b + "self_attn.q_norm.weight", c.head_dim);
    l.k_norm = vec(b + "self_attn.k_norm.weight", c.head_dim);
    l.post_attention_norm = vec(b + "post_attention_layernorm.weight", D);
    l.pre_feedforward_norm = vec(b + "pre_feedforward_layernorm.weight", D);
    l.post_feedforward_norm = vec(b + "post_feedforward_layernorm.weight", D);
    l.gate = linear(b + "mlp.gate_proj", I, D);
    l.up = linear(b + "mlp.up_proj", I, D);
    l.down = linear(b + "mlp.down_proj", D, I);
    t->layers_.push_back(std::move(l));
  }
  if (c.standardize) {
    t->std_bias_ = vec(tower + "std_bias", D);
    t->std_scale_ = vec(tower + "std_scale", D);
  }
  t->projection_ = matrix(prefix + "embed_vision.embedding_projection.weight", c.out_hidden, D);
  return t;
}

void Gemma4VisionTower::apply(const Linear& l, const float* x, int64_t n, float* y) const {
  if (l.clips_input()) {
    std::vector<float> xc(x, x + size_t(n * l.w.cols));
    clamp_all(xc.data(), xc.size(), l.in_min, l.in_max);
    matmul(l.w, xc.data(), n, y);
  } else {
    matmul(l.w, x, n, y);
  }
  if (l.clips_output()) clamp_all(y, size_t(n * l.w.rows), l.out_min, l.out_max);
}

std::vector<float> Gemma4VisionTower::forward(const ProcessedImage& px) const {
  const Gemma4VisionConfig& c = config_;
  const int64_t D = c.hidden, P = px.rows, d = c.head_dim, H = c.heads, A = H * d, I = c.intermediate;
  const int k = c.pooling_kernel_size;
  if (px.cols != input_proj_.cols)
    fail(ErrorKind::kBadInput, "patch rows have {} values; the patch embedding takes {}", px.cols, input_proj_.cols);
  if (px.grid_t != 1 || P != int64_t(px.grid_h) * px.grid_w || px.grid_h % k != 0 || px.grid_w % k != 0 || P == 0)
    fail(ErrorKind::kBadInput, "patch grid {}×{} ({} rows) does not tile the pooling kernel {}", px.grid_h, px.grid_w,
         P, k);
  if (std::max(px.grid_h, px.grid_w) > c.position_embedding_size)
    fail(ErrorKind::kBadInput, "patch grid {}×{} exceeds the position table's {} positions", px.grid_h, px.grid_w,
         c.position_embedding_size);

  // Patch embedding of 2·(x − 0.5), plus the x table at the column and the y table at
  // the row (rows are raster: row i is patch (i / grid_w, i % grid_w)).
  std::vector<float> x(px.values.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = 2.0f * (px.values[i] - 0.5f);
  std::vector<float> h(size_t(P * D));
  matmul(input_proj_, x.data(), P, h.data());
  std::vector<float> tx(static_cast<size_t>(D)), ty(static_cast<size_t>(D));
  for (int64_t i = 0; i < P; ++i) {
    matrix_row(position_table_, i % px.grid_w, tx.data());
    matrix_row(position_table_, c.position_embedding_size + i / px.grid_w, ty.data());
    float* hr = h.data() + size_t(i * D);
    for (int64_t e = 0; e < D; ++e) hr[e] += tx[size_t(e)] + ty[size_t(e)];
  }

  // 2-D RoPE tables: half = d/2 values per axis, quarter = d/4 frequencies; angle
  // (i, a, j) = pos_a(i) · θ^(−2j/half), a = 0 (x, first half), 1 (y, second half).
  const int64_t half = d / 2, quarter = d / 4;
  std::vector<float> cos_t(size_t(P * half)), sin_t(size_t(P * half));
  for (int64_t i = 0; i < P; ++i)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t j = 0; j < quarter; ++j) {
        const double pos = double(a == 0 ? i % px.grid_w : i / px.grid_w);
        const double angle = pos * std::pow(c.rope_theta, -2.0 * double(j) / double(half));
        cos_t[size_t(i * half + a * quarter + j)] = float(std::cos(angle));
        sin_t[size_t(i * half + a * quarter + j)] = float(std::sin(angle));
      }
  auto rope2d = [&](float* v) {  // v: [P, H·d]
    parallel_for(size_t(P), [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i)
        for (int64_t head = 0; head < H; ++head)
          for (int64_t a = 0; a < 2; ++a) {
            float* u = v + i * size_t(A) + size_t(head * d + a * half);
            const float* cs = cos_t.data() + i * size_t(half) + size_t(a * quarter);
            const float* sn = sin_t.data() + i * size_t(half) + size_t(a * quarter);
            for (int64_t j = 0; j < quarter; ++j) {
              const float x0 = u[j], x1 = u[j + quarter];
              u[j] = x0 * cs[j] - x1 * sn[j];
              u[j + quarter] = x1 * cs[j] + x0 * sn[j];
            }
          }
    });
  };

  const std::vector<float> ones(size_t(std::max(d, D)), 1.0f);
  std::vector<float> u(size_t(P * D)), q(size_t(P * A)), kk(size_t(P * A)), v(size_t(P * A)), attn(size_t(P * A));
  std::vector<float> tmp(size_t(P * D)), gate(size_t(P * I)), up(size_t(P * I));
  for (const Layer& l : layers_) {
    rms_norm(h.data(), l.input_norm.data(), P, D, c.eps, u.data());
    apply(l.q, u.data(), P, q.data());
    apply(l.k, u.data(), P, kk.data());
    apply(l.v, u.data(), P, v.data());
    rms_norm(q.data(), l.q_norm.data(), P * H, d, c.eps, q.data());
    rms_norm(kk.data(), l.k_norm.data(), P * H, d, c.eps, kk.data());
    rms_norm(v.data(), ones.data(), P * H, d, c.eps, v.data());
    rope2d(q.data());
    rope2d(kk.data());
    image_attention(q.data(), A, kk.data(), A, v.data(), A, P, H, d, 1.0f, attn.data());
    apply(l.o, attn.data(), P, tmp.data());
    rms_norm(tmp.data(), l.post_attention_norm.data(), P, D, c.eps, tmp.data());
    for (size_t e = 0; e < h.size(); ++e) h[e] += tmp[e];
    rms_norm(h.data(), l.pre_feedforward_norm.data(), P, D, c.eps, u.data());
    apply(l.gate, u.data(), P, gate.data());
    apply(l.up, u.data(), P, up.data());
    geglu(gate.data(), up.data(), P * I, gate.data());
    apply(l.down, gate.data(), P, tmp.data());
    rms_norm(tmp.data(), l.post_feedforward_norm.data(), P, D, c.eps, tmp.data());
    for (size_t e = 0; e < h.size(); ++e) h[e] += tmp[e];
  }

  // k × k average pooling: pooled cell (r / k, col / k) in raster order over the pooled
  // grid, the mean of its k² patches (summed in double), times √D.
  const int64_t th = px.grid_h / k, tw = px.grid_w / k, N = th * tw;
  std::vector<double> acc(size_t(N * D), 0.0);
  for (int64_t i = 0; i < P; ++i) {
    const int64_t cell = (i / px.grid_w / k) * tw + (i % px.grid_w) / k;
    const float* hr = h.data() + size_t(i * D);
    double* ar = acc.data() + size_t(cell * D);
    for (int64_t e = 0; e < D; ++e) ar[e] += hr[e];
  }
  std::vector<float> s(size_t(N * D));
  const double scale = std::sqrt(double(D)) / double(k * k);
  for (size_t e = 0; e < s.size(); ++e) s[e] = float(acc[e] * scale);
  if (c.standardize)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t e = 0; e < D; ++e) {
        float& val = s[size_t(n * D + e)];
        val = (val - std_bias_[size_t(e)]) * std_scale_[size_t(e)];
      }
  rms_norm(s.data(), ones.data(), N, D, c.eps, s.data());
  std::vector<float> out(size_t(N * c.out_hidden));
  matmul(projection_, s.data(), N, out.data());
  return out;
}

namespace {

class Gemma4Encoder final : public VisionEncoder {
 public:
  Gemma4Encoder(std::unique_ptr<Checkpoint> weights, std::unique_ptr<Gemma4VisionTower> tower,
                Gemma4ProcessorConfig processor, ImagePlaceholder placeholder)
      : weights_(std::move(weights)), tower_(std::move(tower)), processor_(processor), placeholder_(placeholder) {}

  std::string name() const override { return "gemma4"; }
  ImagePlaceholder placeholder() const override { return placeholder_; }
  int out_hidden() const override { return tower_->config().out_hidden; }
  ProcessedImage process(const DecodedImage& image) const override { return gemma4_process(image, processor_); }
  std::vector<float> encode(const ProcessedImage& image) const override { return tower_->forward(image); }
  double matmul_flops(const ProcessedImage& image) const override {
    const Gemma4VisionConfig& c = tower_->config();
    const double P = double(image.rows), D = c.hidden, I = c.intermediate, A = double(c.heads) * c.head_dim;
    const double k2 = double(c.pooling_kernel_size) * c.pooling_kernel_size;
    const double layer = 4 * P * D * A + 3 * P * D * I + 2 * P * P * A;  // q k v o, gate up down, q·kᵀ and ·v
    return 2 * (P * double(image.cols) * D + c.depth * layer + (P / k2) * D * c.out_hidden);
  }

 private:
  std::unique_ptr<Checkpoint> weights_;  // backs the tower's weights
  std::unique_ptr<Gemma4VisionTower> tower_;
  Gemma4ProcessorConfig processor_;
  ImagePlaceholder placeholder_;
};

// The image processor's settings beside the weights: transformers ≥ 5 saves the
// processor as processor_config.json with the image processor's keys under
// "image_processor"; older saves are preprocessor_config.json with them at the top.
Gemma4ProcessorConfig processor_config(const Checkpoint& weights) {
  namespace fs = std::filesystem;
  const fs::path dir(weights.dir());
  if (!fs::is_directory(dir)) return {};
  if (fs::exists(dir / "processor_config.json")) {
    const nlohmann::json j = read_json_file((dir / "processor_config.json").string());
    if (j.contains("image_processor") && j["image_processor"].is_object())
      return Gemma4ProcessorConfig::from_json(j["image_processor"]);
  }
  if (fs::exists(dir / "preprocessor_config.json"))
    return Gemma4ProcessorConfig::from_json(read_json_file((dir / "preprocessor_config.json").string()));
  return {};
}

}  // namespace

std::unique_ptr<VisionEncoder> load_gemma4_encoder(std::unique_ptr<Checkpoint> weights,
                                                   const ImagePlaceholder& lm_tokens, const EncoderOptions& options) {
  // The tower alone (`nextn perf`, `debug-image`) needs no token ids; a language model
  // with an image token must also have the begin and end of image around it.
  if (lm_tokens.token >= 0 && (lm_tokens.begin < 0 || lm_tokens.end < 0))
    fail(ErrorKind::kBadInput, "{}: the language model has image_token_id but lacks boi_token_id or eoi_token_id",
         weights->dir());
  auto tower = Gemma4VisionTower::load(*weights);
  Gemma4ProcessorConfig processor = processor_config(*weights);
  processor.patch_size = tower->config().patch_size;
  processor.pooling_kernel_size = tower->config().pooling_kernel_size;
  // The budget is the most tokens an image becomes; the processor fills it, so a least
  // count has nothing to act on.
  if (options.max_tokens > 0) processor.max_soft_tokens = options.max_tokens;
  return std::make_unique<Gemma4Encoder>(std::move(weights), std::move(tower), processor, lm_tokens);
}

}  // namespace nextn::vision
