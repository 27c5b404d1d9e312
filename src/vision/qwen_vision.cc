// vision/qwen_vision.cc — the Qwen3.5 vision tower's forward pass.
#include "vision/qwen_vision.h"

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

// LayerNorm over each row of n: (x − mean)/√(var + eps) · w + b, statistics in double.
void layer_norm(const float* x, int64_t rows, int64_t n, const std::vector<float>& w, const std::vector<float>& b,
                float eps, float* out) {
  parallel_for(size_t(rows), [&](size_t begin, size_t end, int) {
    for (size_t r = begin; r < end; ++r) {
      const float* xr = x + r * size_t(n);
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += xr[i];
      mean /= double(n);
      for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      const double inv = 1.0 / std::sqrt(var / double(n) + eps);
      float* o = out + r * size_t(n);
      for (int64_t i = 0; i < n; ++i) o[i] = float((xr[i] - mean) * inv) * w[size_t(i)] + b[size_t(i)];
    }
  });
}

void gelu_erf(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * float(M_SQRT1_2)));
}

// (row, column) of each pixel_values row: rows run over merge windows
// (block row, block column, row in block, column in block).
std::vector<std::pair<int, int>> patch_positions(int grid_h, int grid_w, int m) {
  std::vector<std::pair<int, int>> pos;
  pos.reserve(size_t(grid_h) * size_t(grid_w));
  for (int bh = 0; bh < grid_h / m; ++bh)
    for (int bw = 0; bw < grid_w / m; ++bw)
      for (int ih = 0; ih < m; ++ih)
        for (int iw = 0; iw < m; ++iw) pos.emplace_back(bh * m + ih, bw * m + iw);
  return pos;
}

}  // namespace

int QwenVisionConfig::table_side() const {
  const int side = int(std::lround(std::sqrt(double(num_position_embeddings))));
  if (side * side != num_position_embeddings)
    fail(ErrorKind::kBadInput, "vision_config.num_position_embeddings: {} is not a square", num_position_embeddings);
  return side;
}

QwenVisionConfig QwenVisionConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) fail(ErrorKind::kBadInput, "vision_config: expected an object");
  QwenVisionConfig c;
  c.depth = config_int(j, "depth", c.depth);
  c.hidden = config_int(j, "hidden_size", c.hidden);
  c.heads = config_int(j, "num_heads", c.heads);
  c.intermediate = config_int(j, "intermediate_size", c.intermediate);
  c.patch_size = config_int(j, "patch_size", c.patch_size);
  c.temporal_patch_size = config_int(j, "temporal_patch_size", c.temporal_patch_size);
  c.merge_size = config_int(j, "spatial_merge_size", c.merge_size);
  c.num_position_embeddings = config_int(j, "num_position_embeddings", c.num_position_embeddings);
  c.out_hidden = config_int(j, "out_hidden_size", c.out_hidden);
  if (j.contains("deepstack_visual_indexes") && j["deepstack_visual_indexes"].is_array() &&
      !j["deepstack_visual_indexes"].empty())
    fail(ErrorKind::kUnsupported, "vision_config.deepstack_visual_indexes: DeepStack (Qwen3-VL) is not supported");
  if (j.contains("hidden_act") && j["hidden_act"] != "gelu_pytorch_tanh")
    fail(ErrorKind::kUnsupported, "vision_config.hidden_act: only gelu_pytorch_tanh is supported");
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const auto& rp = j["rope_parameters"];
    if (rp.contains("rope_type") && rp["rope_type"] != "axial")
      fail(ErrorKind::kUnsupported, "vision_config.rope_parameters.rope_type: only 'axial' is supported");
    if (rp.contains("rope_theta") && rp["rope_theta"].is_number()) c.rope_theta = rp["rope_theta"].get<double>();
  }
  if (c.hidden % c.heads != 0 || c.head_dim() % 4 != 0)
    fail(ErrorKind::kBadInput, "vision_config: hidden_size {} over {} heads must give a head size divisible by 4",
         c.hidden, c.heads);
  c.table_side();
  return c;
}

std::unique_ptr<QwenVisionTower> QwenVisionTower::load(const Checkpoint& ckpt, const std::string& prefix) {
  const nlohmann::json& cfg = ckpt.config();
  if (!cfg.contains("vision_config"))
    fail(ErrorKind::kBadInput, "{}: config.json has no vision_config (not a vision-language checkpoint)", ckpt.dir());
  auto t = std::unique_ptr<QwenVisionTower>(new QwenVisionTower());
  QwenVisionConfig& c = t->config_;
  c = QwenVisionConfig::from_json(cfg["vision_config"]);
  const int64_t D = c.hidden, I = c.intermediate, p = c.patch_size, T = c.temporal_patch_size;
  const int64_t m2 = int64_t(c.merge_size) * c.merge_size;

  auto vec = [&](const std::string& name, int64_t n) { return ckpt.require(prefix + name, {n}).floats(); };
  auto linear = [&](const std::string& name, int64_t out, int64_t in, const std::vector<int64_t>& shape) {
    const TensorView& v = ckpt.require(prefix + name + ".weight", shape);
    return Linear{WeightMatrix{v.dtype, out, in, v.data}, vec(name + ".bias", out)};
  };
  auto norm = [&](const std::string& name) { return Norm{vec(name + ".weight", D), vec(name + ".bias", D)}; };

  // Conv3d with kernel = stride = (T, p, p) over one patch is a dot product with the
  // weight flattened in (channel, t, y, x) order: pixel_values' column order.
  t->patch_embed_ = linear("patch_embed.proj", D, 3 * T * p * p, {D, 3, T, p, p});
  t->pos_embed_ = ckpt.require(prefix + "pos_embed.weight", {c.num_position_embeddings, D}).floats();
  for (int i = 0; i < c.depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    Block block;
    block.norm1 = norm(b + "norm1");
    block.norm2 = norm(b + "norm2");
    block.qkv = linear(b + "attn.qkv", 3 * D, D, {3 * D, D});
    block.proj = linear(b + "attn.proj", D, D, {D, D});
    block.fc1 = linear(b + "mlp.linear_fc1", I, D, {I, D});
    block.fc2 = linear(b + "mlp.linear_fc2", D, I, {D, I});
    t->blocks_.push_back(std::move(block));
  }
  t->merger_norm_ = norm("merger.norm");
  t->merger_fc1_ = linear("merger.linear_fc1", m2 * D, m2 * D, {m2 * D, m2 * D});
  t->merger_fc2_ = linear("merger.linear_fc2", c.out_hidden, m2 * D, {c.out_hidden, m2 * D});
  return t;
}

std::vector<float> QwenVisionTower::forward(const ProcessedImage& px) const {
  const QwenVisionConfig& c = config_;
  const int64_t D = c.hidden, P = px.rows, d = c.head_dim(), H = c.heads, m = c.merge_size;
  if (px.cols != patch_embed_.w.cols)
    fail(ErrorKind::kBadInput, "pixel_values have {} columns; the patch embedding takes {}", px.cols,
         patch_embed_.w.cols);
  if (px.grid_t != 1 || px.grid_h % m != 0 || px.grid_w % m != 0 || P != int64_t(px.grid_h) * px.grid_w)
    fail(ErrorKind::kBadInput, "pixel_values grid ({}, {}, {}) does not fit the merge size {}", px.grid_t, px.grid_h,
         px.grid_w, m);
  const auto pos = patch_positions(px.grid_h, px.grid_w, int(m));

  // Patch embedding, then the learned table interpolated to the grid: bilinear with
  // aligned corners (sample y = r·(S−1)/(grid_h−1)), in double.
  std::vector<float> h(size_t(P * D));
  matmul(patch_embed_.w, px.values.data(), P, h.data(), patch_embed_.bias.data());
  const int S = c.table_side();
  parallel_for(size_t(P), [&](size_t begin, size_t end, int) {
    for (size_t i = begin; i < end; ++i) {
      const auto [r, col] = pos[i];
      const double y = px.grid_h > 1 ? double(r) * (S - 1) / (px.grid_h - 1) : 0.0;
      const double x = px.grid_w > 1 ? double(col) * (S - 1) / (px.grid_w - 1) : 0.0;
      const int y0 = int(std::floor(y)), x0 = int(std::floor(x));
      const int y1 = std::min(y0 + 1, S - 1), x1 = std::min(x0 + 1, S - 1);
      const double dy = y - y0, dx = x - x0;
      const float* t00 = pos_embed_.data() + size_t(y0 * S + x0) * D;
      const float* t01 = pos_embed_.data() + size_t(y0 * S + x1) * D;
      const float* t10 = pos_embed_.data() + size_t(y1 * S + x0) * D;
      const float* t11 = pos_embed_.data() + size_t(y1 * S + x1) * D;
      float* hr = h.data() + i * size_t(D);
      for (int64_t k = 0; k < D; ++k)
        hr[k] += float((1 - dy) * (1 - dx) * t00[k] + (1 - dy) * dx * t01[k] + dy * (1 - dx) * t10[k] +
                       dy * dx * t11[k]);
    }
  });

  // 2-D RoPE: d/4 frequencies θ^(−2i/(d/2)); the first quarter of each rotate-half
  // rotates with the patch row, the second with its column: angle j < d/2 is
  // row·f_j (j < d/4) or col·f_{j−d/4}, applied to the pair (j, j + d/2).
  const int64_t half = d / 2, quarter = d / 4;
  std::vector<float> cos_t(size_t(P * half)), sin_t(size_t(P * half));
  for (int64_t i = 0; i < P; ++i)
    for (int64_t j = 0; j < half; ++j) {
      const int64_t fi = j < quarter ? j : j - quarter;
      const double f = std::pow(c.rope_theta, -2.0 * double(fi) / double(half));
      const double a = double(j < quarter ? pos[size_t(i)].first : pos[size_t(i)].second) * f;
      cos_t[size_t(i * half + j)] = float(std::cos(a));
      sin_t[size_t(i * half + j)] = float(std::sin(a));
    }
  auto rope2d = [&](float* x, int64_t stride) {  // x: [P, stride], heads of d at the start of each row
    parallel_for(size_t(P), [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i)
        for (int64_t head = 0; head < H; ++head) {
          float* v = x + i * size_t(stride) + size_t(head * d);
          const float* cs = cos_t.data() + i * size_t(half);
          const float* sn = sin_t.data() + i * size_t(half);
          for (int64_t j = 0; j < half; ++j) {
            const float a = v[j], b = v[j + half];
            v[j] = a * cs[j] - b * sn[j];
            v[j + half] = b * cs[j] + a * sn[j];
          }
        }
    });
  };

  std::vector<float> u(size_t(P * D)), qkv(size_t(P * 3 * D)), attn(size_t(P * D)), tmp(size_t(P * D));
  std::vector<float> mlp(size_t(P * c.intermediate));
  const float scale = 1.0f / std::sqrt(float(d));
  for (const Block& blk : blocks_) {
    layer_norm(h.data(), P, D, blk.norm1.weight, blk.norm1.bias, c.eps, u.data());
    matmul(blk.qkv.w, u.data(), P, qkv.data(), blk.qkv.bias.data());
    // qkv rows: [all q | all k | all v], heads of d inside each.
    rope2d(qkv.data(), 3 * D);
    rope2d(qkv.data() + D, 3 * D);
    // Full (bidirectional) attention over the image's patches.
    image_attention(qkv.data(), 3 * D, qkv.data() + D, 3 * D, qkv.data() + 2 * D, 3 * D, P, H, d, scale, attn.data());
    matmul(blk.proj.w, attn.data(), P, tmp.data(), blk.proj.bias.data());
    for (size_t k = 0; k < h.size(); ++k) h[k] += tmp[k];
    layer_norm(h.data(), P, D, blk.norm2.weight, blk.norm2.bias, c.eps, u.data());
    matmul(blk.fc1.w, u.data(), P, mlp.data(), blk.fc1.bias.data());
    gelu_tanh(mlp.data(), int64_t(mlp.size()));  // kernels.h: vectorized over the pool
    matmul(blk.fc2.w, mlp.data(), P, tmp.data(), blk.fc2.bias.data());
    for (size_t k = 0; k < h.size(); ++k) h[k] += tmp[k];
  }

  // Merger: LayerNorm per patch, then each merge window's m² consecutive rows as one
  // row of m²·D (the rows are already in window order), Linear, GELU (erf), Linear.
  const int64_t N = P / (m * m), W = m * m * D;
  layer_norm(h.data(), P, D, merger_norm_.weight, merger_norm_.bias, c.eps, u.data());
  std::vector<float> g(size_t(N * W)), out(size_t(N * c.out_hidden));
  matmul(merger_fc1_.w, u.data(), N, g.data(), merger_fc1_.bias.data());
  gelu_erf(g.data(), g.size());
  matmul(merger_fc2_.w, g.data(), N, out.data(), merger_fc2_.bias.data());
  return out;
}

double QwenVisionTower::matmul_flops(int64_t patches) const {
  const QwenVisionConfig& c = config_;
  const double P = double(patches), D = c.hidden, I = c.intermediate, m2 = double(c.merge_size) * c.merge_size;
  const double embed = P * double(patch_embed_.w.cols) * D;
  const double layer = P * D * 3 * D + P * D * D + 2 * P * D * I + 2 * P * P * D;  // qkv, proj, MLP, q·kᵀ and ·v
  const double merger = (P / m2) * (m2 * D) * (m2 * D + c.out_hidden);
  return 2 * (embed + c.depth * layer + merger);
}

namespace {

class QwenEncoder final : public VisionEncoder {
 public:
  QwenEncoder(std::unique_ptr<Checkpoint> weights, std::unique_ptr<QwenVisionTower> tower,
              QwenProcessorConfig processor, int32_t image_token)
      : weights_(std::move(weights)), tower_(std::move(tower)), processor_(processor), image_token_(image_token) {}

  std::string name() const override { return "qwen3_5"; }
  ImagePlaceholder placeholder() const override { return {image_token_, -1, -1}; }
  int out_hidden() const override { return tower_->config().out_hidden; }
  ProcessedImage process(const DecodedImage& image) const override { return qwen_process(image, processor_); }
  std::vector<float> encode(const ProcessedImage& image) const override { return tower_->forward(image); }
  double matmul_flops(const ProcessedImage& image) const override { return tower_->matmul_flops(image.rows); }

 private:
  std::unique_ptr<Checkpoint> weights_;  // backs the tower's weights
  std::unique_ptr<QwenVisionTower> tower_;
  QwenProcessorConfig processor_;
  int32_t image_token_;
};

}  // namespace

std::unique_ptr<VisionEncoder> load_qwen_encoder(std::unique_ptr<Checkpoint> weights,
                                                 const ImagePlaceholder& lm_tokens, const EncoderOptions& options) {
  auto tower = QwenVisionTower::load(*weights);
  QwenProcessorConfig processor;
  const std::filesystem::path pre = std::filesystem::path(weights->dir()) / "preprocessor_config.json";
  if (std::filesystem::is_directory(weights->dir()) && std::filesystem::exists(pre))
    processor = QwenProcessorConfig::from_json(read_json_file(pre.string()));
  else if (weights->config().contains("preprocessor_config"))  // from an mmproj GGUF's metadata
    processor = QwenProcessorConfig::from_json(weights->config()["preprocessor_config"]);
  processor.patch_size = tower->config().patch_size;
  processor.temporal_patch_size = tower->config().temporal_patch_size;
  processor.merge_size = tower->config().merge_size;
  // A token is one merge window: factor² pixels.
  const int64_t per_token = int64_t(processor.factor()) * processor.factor();
  if (options.min_tokens > 0) processor.min_pixels = options.min_tokens * per_token;
  if (options.max_tokens > 0) processor.max_pixels = options.max_tokens * per_token;
  if (processor.max_pixels < processor.min_pixels)
    fail(ErrorKind::kBadInput, "image token limits: at most {} pixels is below the least, {}", processor.max_pixels,
         processor.min_pixels);
  return std::make_unique<QwenEncoder>(std::move(weights), std::move(tower), processor, lm_tokens.token);
}

}  // namespace nextn::vision
