// model/dflash_model.cc — loading, checking and the two batched operations of the DFlash
// drafter (see dflash_model.h). The layers are the shared decoder block's weights
// (decoder_block.h) run in two partial forms: the context form projects g_j to keys and
// values only; the block form attends over a sequence's stored context and then over its
// own block rows, without a causal mask, through the same online-softmax step the KV
// caches use (kv/attention_simd.h).
#include "model/dflash_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <fmt/ranges.h>

#include "io/checkpoint.h"
#include "kv/attention_simd.h"
#include "model/config_reader.h"
#include "model/decoder_model.h"
#include "model/drafter_config.h"
#include "model/rope_table.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace nextn {

void DFlashContext::truncate(int n) {
  if (n >= length) return;
  n = std::max(n, 0);
  for (auto* side : {&k, &v})
    for (auto& rows : *side) rows.resize(rows.size() / size_t(length) * size_t(n));  // [length, head_dim] → [n, head_dim]
  length = n;
}

size_t DFlashContext::bytes() const {
  size_t n = 0;
  for (const auto& rows : k) n += rows.size() * sizeof(float);
  for (const auto& rows : v) n += rows.size() * sizeof(float);
  return n;
}

namespace {

constexpr int kKeyChunk = 64;  // keys per online-softmax step (bounds the scores scratch)

class DFlashModelImpl : public DFlashModel {
 public:
  DFlashModelImpl(std::unique_ptr<Checkpoint> ckpt, const DecoderModel& target)
      : ckpt_(std::move(ckpt)), store_(*ckpt_, true), target_(target) {
    // Messages name config.json, or the GGUF file whose metadata the config comes from.
    const std::string path = ckpt_->gguf_metadata() ? ckpt_->dir()
                                                    : (std::filesystem::path(ckpt_->dir()) / "config.json").string();
    ConfigReader c(ckpt_->config(), path);
    const ModelConfig& tc = target.config();
    vocab_ = tc.vocab_size;

    shape_.hidden = c.require_int("hidden_size");
    if (shape_.hidden != tc.hidden_size)
      c.error(ErrorKind::kBadInput, "hidden_size {} does not match the target's hidden_size {} ({}): the drafter "
              "reads the target's embedding and head", shape_.hidden, tc.hidden_size, target.dir());
    if (c.has("vocab_size") && c.get_int("vocab_size", 0) != tc.vocab_size)
      c.error(ErrorKind::kBadInput, "vocab_size {} does not match the target's vocab_size {} ({})",
              c.get_int("vocab_size", 0), tc.vocab_size, target.dir());
    if (c.has("num_target_layers") && c.get_int("num_target_layers", 0) != tc.num_layers)
      c.error(ErrorKind::kBadInput, "num_target_layers {} does not match the target's {} layers ({})",
              c.get_int("num_target_layers", 0), tc.num_layers, target.dir());
    const int n_layers = c.require_int("num_hidden_layers");
    shape_.heads = c.require_int("num_attention_heads");
    shape_.kv_heads = c.get_int("num_key_value_heads", shape_.heads);
    shape_.intermediate = c.require_int("intermediate_size");
    if (n_layers <= 0 || shape_.heads <= 0 || shape_.kv_heads <= 0 || shape_.intermediate <= 0 ||
        shape_.heads % shape_.kv_heads != 0)
      c.error(ErrorKind::kBadInput, "num_hidden_layers, num_attention_heads, num_key_value_heads (dividing the heads) "
              "and intermediate_size must be positive");
    shape_.head_dim = c.get_int("head_dim", shape_.hidden / shape_.heads);
    shape_.qkv_bias = c.get_bool("attention_bias", false);
    shape_.qk_norm = true;
    shape_.eps = float(c.get_double("rms_norm_eps", 1e-6));
    double theta = c.get_double("rope_theta", 0.0);
    if (theta <= 0 && c.has("rope_parameters") && c.json()["rope_parameters"].is_object())
      theta = c.json()["rope_parameters"].value("rope_theta", 0.0);
    if (theta <= 0) c.error(ErrorKind::kBadInput, "missing a positive 'rope_theta'");
    inv_freq_ = rope_inv_freq(shape_.head_dim, theta, RopeScaling{});

    block_size_ = c.get_int("block_size", 16);
    if (block_size_ < 2) c.error(ErrorKind::kBadInput, "block_size {} must be at least 2", block_size_);
    nlohmann::json dflash = c.has("dflash_config") ? c.json()["dflash_config"] : nlohmann::json::object();
    if (!dflash.is_object()) c.error(ErrorKind::kBadInput, "'dflash_config' must be an object");
    if (!dflash.contains("mask_token_id") || !dflash["mask_token_id"].is_number_integer())
      c.error(ErrorKind::kBadInput, "missing integer 'dflash_config.mask_token_id'");
    const int64_t mask = dflash["mask_token_id"].get<int64_t>();
    if (mask < 0 || mask >= tc.vocab_size)
      c.error(ErrorKind::kBadInput, "dflash_config.mask_token_id {} is outside the target's vocabulary (vocab_size {}, {})",
              mask, tc.vocab_size, target.dir());
    mask_ = int32_t(mask);
    // Tap ids are target layers whose OUTPUT is read: stream id + 1 (the input of the next layer).
    std::vector<int> ids;
    if (dflash.contains("target_layer_ids")) {
      if (!dflash["target_layer_ids"].is_array() || dflash["target_layer_ids"].empty())
        c.error(ErrorKind::kBadInput, "'dflash_config.target_layer_ids' must be a non-empty array of layer ids");
      for (const auto& id : dflash["target_layer_ids"]) {
        if (!id.is_number_integer()) c.error(ErrorKind::kBadInput, "'dflash_config.target_layer_ids' holds a non-integer");
        ids.push_back(id.get<int>());
      }
    } else if (n_layers == 1) {
      ids.push_back(tc.num_layers / 2);
    } else {
      for (int i = 0; i < n_layers; ++i)
        ids.push_back(int(std::lround(1.0 + double(i) * (tc.num_layers - 4) / double(n_layers - 1))));
    }
    for (int id : ids) {
      if (id < 0 || id >= tc.num_layers)
        c.error(ErrorKind::kBadInput, "target_layer_id {} is out of range: the target {} has layers 0..{}", id,
                target.dir(), tc.num_layers - 1);
      streams_.push_back(id + 1);
    }
    const int64_t fc_in = int64_t(streams_.size()) * tc.hidden_size;
    const TensorView* fc = ckpt_->find("fc.weight");
    if (!fc) c.error(ErrorKind::kBadInput, "missing tensor 'fc.weight'");
    if (fc->shape.size() != 2 || fc->shape[0] != shape_.hidden || fc->shape[1] != fc_in)
      c.error(ErrorKind::kBadInput, "fc.weight has shape [{}], but {} target streams of hidden size {} need [{}, {}]",
              fmt::join(fc->shape, ", "), streams_.size(), tc.hidden_size, shape_.hidden, fc_in);

    // Sliding layers see only the newest `sliding_window` context rows.
    std::vector<std::string> types;
    if (c.has("layer_types")) types = c.get_strings("layer_types");
    if (!types.empty() && int(types.size()) != n_layers)
      c.error(ErrorKind::kBadInput, "layer_types lists {} layers but num_hidden_layers is {}", types.size(), n_layers);
    const int window = c.get_int("sliding_window", 0);
    for (int i = 0; i < n_layers; ++i) {
      const std::string type = types.empty() ? "full_attention" : types[size_t(i)];
      if (type != "full_attention" && type != "sliding_attention")
        c.error(ErrorKind::kBadInput, "unknown layer type '{}' at layer {}", type, i);
      if (type == "sliding_attention" && window <= 0)
        c.error(ErrorKind::kBadInput, "layer {} is sliding_attention but sliding_window is not positive", i);
      windows_.push_back(type == "sliding_attention" ? window : 0);
      layers_.push_back(load_block(store_, "layers." + std::to_string(i) + ".", shape_));
    }
    fc_ = store_.matrix("fc.weight", shape_.hidden, fc_in);
    hidden_norm_ = store_.vector("hidden_norm.weight", shape_.hidden);
    norm_ = store_.vector("norm.weight", shape_.hidden);
    if (!store_.uses_mapping()) ckpt_.reset();  // weights are copied
  }

  int block_size() const override { return block_size_; }
  int32_t mask_token() const override { return mask_; }
  int num_layers() const override { return int(layers_.size()); }
  const std::vector<int>& streams() const override { return streams_; }

  DFlashContext new_context() const override {
    DFlashContext ctx;
    ctx.k.resize(layers_.size() * size_t(shape_.kv_heads));
    ctx.v.resize(ctx.k.size());
    return ctx;
  }

  void add_context(DFlashContext& ctx, const float* streams, int n) override {
    if (n <= 0) return;
    const int64_t H = shape_.hidden, D = shape_.head_dim, kv_dim = int64_t(shape_.kv_heads) * D;
    g_.resize(size_t(n) * H);
    matmul(fc_, streams, n, g_.data());
    rms_norm(g_.data(), hidden_norm_, n, H, shape_.eps, g_.data());
    positions_.resize(size_t(n));
    for (int i = 0; i < n; ++i) positions_[size_t(i)] = ctx.length + i;
    k_.resize(size_t(n) * kv_dim);
    v_.resize(size_t(n) * kv_dim);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const BlockWeights& w = layers_[l];
      apply_each(g_.data(), n, {{w.k, k_.data()}, {w.v, v_.data()}});
      rms_norm(k_.data(), w.k_norm, int64_t(n) * shape_.kv_heads, D, shape_.eps, k_.data());
      rope(k_.data(), n, shape_.kv_heads, D, positions_.data(), inv_freq_.data());
      for (int h = 0; h < shape_.kv_heads; ++h) {
        std::vector<float>& ks = ctx.k[l * size_t(shape_.kv_heads) + size_t(h)];
        std::vector<float>& vs = ctx.v[l * size_t(shape_.kv_heads) + size_t(h)];
        for (int i = 0; i < n; ++i) {
          const float* kr = k_.data() + size_t(i) * kv_dim + size_t(h) * D;
          const float* vr = v_.data() + size_t(i) * kv_dim + size_t(h) * D;
          ks.insert(ks.end(), kr, kr + D);
          vs.insert(vs.end(), vr, vr + D);
        }
      }
    }
    ctx.length += n;
  }

  void draft_blocks(std::span<const DFlashBlock> blocks, std::vector<float>& logits, int vocab_rows) override {
    const int64_t H = shape_.hidden, D = shape_.head_dim;
    const int64_t kv_dim = int64_t(shape_.kv_heads) * D;
    row0_.clear();
    tokens_.clear();
    positions_.clear();
    for (const DFlashBlock& b : blocks) {
      row0_.push_back(int(tokens_.size()));
      for (size_t i = 0; i < b.tokens.size(); ++i) {
        tokens_.push_back(b.tokens[i]);
        positions_.push_back(b.context->length + int(i));
      }
    }
    const int R = int(tokens_.size());
    logits.clear();
    if (R == 0) return;
    x_.resize(size_t(R) * H);
    embed_rows(target_.embedding(), tokens_.data(), R, x_.data());
    if (const float s = target_.config().embedding_scale; s != 1.0f)
      for (float& e : x_) e *= s;
    scratch_.reserve(R, shape_);
    kb_.resize(size_t(R) * kv_dim);
    vb_.resize(size_t(R) * kv_dim);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const BlockWeights& w = layers_[l];
      float *xn = scratch_.xn.data(), *q = scratch_.q.data(), *k = scratch_.k.data(), *v = scratch_.v.data();
      rms_norm(x_.data(), w.input_norm, R, H, shape_.eps, xn);
      apply_each(xn, R, {{w.q, q}, {w.k, k}, {w.v, v}});
      rms_norm(q, w.q_norm, int64_t(R) * shape_.heads, D, shape_.eps, q);
      rms_norm(k, w.k_norm, int64_t(R) * shape_.kv_heads, D, shape_.eps, k);
      rope(q, R, shape_.heads, D, positions_.data(), inv_freq_.data());
      rope(k, R, shape_.kv_heads, D, positions_.data(), inv_freq_.data());
      // The block's keys and values head-major ([kv_heads][R][D]): one head's rows of a
      // block are then contiguous, as the context's are.
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < shape_.kv_heads; ++h) {
          std::copy_n(k + size_t(r) * kv_dim + size_t(h) * D, D, kb_.data() + (size_t(h) * R + r) * D);
          std::copy_n(v + size_t(r) * kv_dim + size_t(h) * D, D, vb_.data() + (size_t(h) * R + r) * D);
        }
      attend(blocks, int(l), q, R, scratch_.attn.data());
      apply(w.o, scratch_.attn.data(), R, scratch_.proj.data());
      add_into(x_.data(), scratch_.proj.data(), size_t(R) * H);
      const MlpWeights mlp{w.post_norm, w.gate, w.up, w.down};
      run_mlp(mlp, shape_.hidden, shape_.intermediate, shape_.eps, x_.data(), R, scratch_);
    }
    // Slots 1.. of each block, through the final norm and the target's head.
    const int out_rows = R - int(blocks.size());
    y_.resize(size_t(out_rows) * H);
    int o = 0;
    for (size_t b = 0; b < blocks.size(); ++b)
      for (size_t i = 1; i < blocks[b].tokens.size(); ++i, ++o)
        rms_norm(x_.data() + (size_t(row0_[b]) + i) * H, norm_, 1, H, shape_.eps, y_.data() + size_t(o) * H);
    WeightMatrix head = target_.lm_head();
    if (vocab_rows > 0) head.rows = std::min<int64_t>(head.rows, vocab_rows);  // the first ids' rows
    logits.resize(size_t(out_rows) * size_t(head.rows));
    matmul(head, y_.data(), out_rows, logits.data());
    if (const float cap = target_.config().final_logit_softcap; cap > 0)
      softcap(logits.data(), int64_t(logits.size()), cap);
  }

 private:
  // out [R, q_dim]: every row of block b over b's context (the newest windows_[layer]
  // rows of it on a sliding layer) and all of b's rows. Items: (block, query head).
  void attend(std::span<const DFlashBlock> blocks, int layer, const float* q, int R, float* out) const {
    const int D = shape_.head_dim, heads = shape_.heads, group = shape_.heads / shape_.kv_heads;
    const size_t q_dim = size_t(heads) * size_t(D);
    const float scale = 1.0f / std::sqrt(float(D));
    const int window = windows_[size_t(layer)];
    auto work = [&](size_t begin, size_t end, int) {
      std::vector<float> scores(kKeyChunk), acc(static_cast<size_t>(D));
      for (size_t item = begin; item < end; ++item) {
        const size_t b = item / size_t(heads);
        const int h = int(item % size_t(heads)), kvh = h / group;
        const DFlashBlock& blk = blocks[b];
        const int n = int(blk.tokens.size()), row0 = row0_[b];
        const DFlashContext& ctx = *blk.context;
        const int first = window > 0 ? std::max(0, ctx.length - window) : 0;
        const float* kc = ctx.k[size_t(layer) * size_t(shape_.kv_heads) + size_t(kvh)].data();
        const float* vc = ctx.v[size_t(layer) * size_t(shape_.kv_heads) + size_t(kvh)].data();
        const float* kb = kb_.data() + (size_t(kvh) * R + row0) * D;
        const float* vb = vb_.data() + (size_t(kvh) * R + row0) * D;
        for (int r = 0; r < n; ++r) {
          const float* qr = q + size_t(row0 + r) * q_dim + size_t(h) * D;
          float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int t = first; t < ctx.length; t += kKeyChunk) {
            const int count = std::min(kKeyChunk, ctx.length - t);
            attend_block(qr, kc + size_t(t) * D, vc + size_t(t) * D, count, D, scale, scores.data(), &m, &l, acc.data());
          }
          for (int t = 0; t < n; t += kKeyChunk) {
            const int count = std::min(kKeyChunk, n - t);
            attend_block(qr, kb + size_t(t) * D, vb + size_t(t) * D, count, D, scale, scores.data(), &m, &l, acc.data());
          }
          float* o = out + size_t(row0 + r) * q_dim + size_t(h) * D;
          const float inv = 1.0f / l;
          for (int d = 0; d < D; ++d) o[d] = acc[size_t(d)] * inv;
        }
      }
    };
    const size_t items = blocks.size() * size_t(heads);
    if (items == 1) work(0, 1, 0);
    else parallel_for(items, work);
  }

  std::unique_ptr<Checkpoint> ckpt_;  // kept while weights are served from its mmap
  WeightStore store_;
  const DecoderModel& target_;
  int vocab_ = 0, block_size_ = 16;
  int32_t mask_ = 0;
  BlockShape shape_;
  std::vector<float> inv_freq_;      // [head_dim / 2], NeoX rotation
  std::vector<int> streams_;         // target streams of fc's columns: target_layer_ids + 1
  std::vector<int> windows_;         // per layer: context rows seen (0: all)
  std::vector<BlockWeights> layers_;  // layers.{i}.*: q/k/v/o [no bias], q_norm/k_norm [head_dim], SwiGLU
  WeightMatrix fc_;                  // fc [H, K · H_t]
  const float* hidden_norm_ = nullptr;  // [H]: RMSNorm after fc
  const float* norm_ = nullptr;         // [H]: the final RMSNorm

  // Scratch reused across calls.
  BlockScratch scratch_;
  std::vector<float> g_, k_, v_, x_, y_, kb_, vb_;
  std::vector<int32_t> positions_, tokens_;
  std::vector<int> row0_;
};

}  // namespace

bool DFlashModel::is_dflash(const nlohmann::json& config) {
  return first_architecture(config) == "DFlashDraftModel";
}

std::unique_ptr<DFlashModel> DFlashModel::load(const std::string& dir, const Model& target) {
  auto* decoder = dynamic_cast<const DecoderModel*>(&target);
  if (!decoder) fail(ErrorKind::kInternal, "DFlash drafter: unsupported target model type");
  return std::make_unique<DFlashModelImpl>(Checkpoint::open(dir), *decoder);
}

}  // namespace nextn
