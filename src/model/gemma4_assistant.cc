// model/gemma4_assistant.cc — loading and the draft step of the Gemma 4 assistant (see
// gemma4_assistant.h). Its layers are the Gemma 4 layer (gemma4_layer.cc) in query-only
// form, each pointed at a target donor layer's KV slot.
#include "model/gemma4_assistant.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "io/checkpoint.h"
#include "model/config_reader.h"
#include "model/decoder_model.h"
#include "model/drafter_config.h"
#include "model/gemma4_layers.h"
#include "util/error.h"

namespace nextn {
namespace {

class Gemma4AssistantImpl : public Gemma4Assistant {
 public:
  Gemma4AssistantImpl(std::unique_ptr<Checkpoint> ckpt, const DecoderModel& target)
      : ckpt_(std::move(ckpt)), store_(*ckpt_, true), target_(target) {
    const std::string path = (std::filesystem::path(ckpt_->dir()) / "config.json").string();
    const nlohmann::json& top_json = ckpt_->config();
    ConfigReader top(top_json, path);
    if (!top_json.contains("text_config") || !top_json["text_config"].is_object())
      top.error(ErrorKind::kBadInput, "missing object 'text_config'");
    const nlohmann::json text_json = gemma4_flat_config(top_json["text_config"], path + " text_config");
    ConfigReader text(text_json, path + " text_config");
    const ModelConfig& tc = target.config();
    if (tc.architecture.rfind("Gemma4", 0) != 0)
      top.error(ErrorKind::kBadInput, "a Gemma 4 assistant needs a Gemma 4 target, but {} is '{}'", target.dir(),
                tc.architecture);

    const int backbone = top.require_int("backbone_hidden_size");
    if (backbone != tc.hidden_size)
      top.error(ErrorKind::kBadInput, "backbone_hidden_size {} does not match the target's hidden_size {} ({})",
                backbone, tc.hidden_size, target.dir());
    vocab_ = text.require_int("vocab_size");
    if (vocab_ != tc.vocab_size)
      top.error(ErrorKind::kBadInput, "vocab_size {} does not match the target's vocab_size {} ({})", vocab_,
                tc.vocab_size, target.dir());
    target_hidden_ = tc.hidden_size;
    hidden_ = text.require_int("hidden_size");
    const int n_layers = text.require_int("num_hidden_layers");
    const int heads = text.require_int("num_attention_heads");
    const int intermediate = text.require_int("intermediate_size");
    if (hidden_ <= 0 || n_layers <= 0 || heads <= 0 || intermediate <= 0)
      top.error(ErrorKind::kBadInput, "hidden_size, num_hidden_layers, num_attention_heads and intermediate_size must be positive");
    eps_ = float(text.get_double("rms_norm_eps", 1e-6));
    default_tokens_ = top.get_int("num_assistant_tokens", 4);
    if (default_tokens_ <= 0) top.error(ErrorKind::kBadInput, "num_assistant_tokens must be positive");
    if (text.has("final_logit_softcapping")) softcap_ = float(text.get_double("final_logit_softcapping", 0.0));

    std::vector<std::string> types;
    if (text.has("layer_types") && text.json()["layer_types"].is_array()) {
      for (const auto& t : text.json()["layer_types"])
        types.push_back(t.is_string() ? t.get<std::string>() : t.dump());
    }
    if (int(types.size()) != n_layers)
      top.error(ErrorKind::kBadInput, "text_config.layer_types lists {} layers but num_hidden_layers is {}", types.size(),
                n_layers);

    // Each layer reads the last target layer of its type that owns KV.
    for (int i = 0; i < n_layers; ++i) {
      MixerKind kind;
      const std::string type = gemma4_layer_type(types[size_t(i)]);  // legacy names mapped
      if (type == "sliding_attention") kind = MixerKind::kSlidingAttention;
      else if (type == "full_attention") kind = MixerKind::kAttention;
      else top.error(ErrorKind::kBadInput, "unknown layer type '{}' at assistant layer {}", types[size_t(i)], i);
      int donor = -1;
      for (int j = 0; j < tc.num_layers; ++j)
        if (tc.layers[size_t(j)].mixer == kind && tc.layers[size_t(j)].attention.kv_source < 0) donor = j;
      if (donor < 0)
        top.error(ErrorKind::kBadInput, "assistant layer {} is {} but the target has no such layer with its own KV", i,
                  types[size_t(i)]);
      LayerSpec spec = tc.layers[size_t(donor)];  // head geometry, window, RoPE of the KV it reads
      const bool full = kind == MixerKind::kAttention;
      const int head_dim = full ? text.get_int("global_head_dim", 512) : text.get_int("head_dim", 0);
      if (head_dim != spec.attention.head_dim)
        top.error(ErrorKind::kBadInput, "assistant layer {} ({}): head dim {} does not match the target's {} (layer {})",
                  i, types[size_t(i)], head_dim, spec.attention.head_dim, donor);
      const int kv_heads = full && text.get_bool("attention_k_eq_v", false) && text.has("num_global_key_value_heads")
                               ? text.get_int("num_global_key_value_heads", 0)
                               : text.get_int("num_key_value_heads", 0);
      if (kv_heads != spec.attention.kv_heads)
        top.error(ErrorKind::kBadInput, "assistant layer {} ({}): {} key/value heads do not match the target's {} (layer {})",
                  i, types[size_t(i)], kv_heads, spec.attention.kv_heads, donor);
      if (heads % kv_heads != 0)
        top.error(ErrorKind::kBadInput, "num_attention_heads ({}) is not a multiple of {} key/value heads", heads,
                  kv_heads);
      spec.attention.heads = heads;
      spec.intermediate = intermediate;
      spec.mlp = MlpSpec{};  // the assistant's MLPs are dense, whatever the target's are
      Gemma4BlockOptions o;
      o.hidden = hidden_;
      o.eps = eps_;
      o.query_only = true;
      layers_.push_back(make_gemma4_layer(spec, o, store_, "model.layers." + std::to_string(i) + "."));
      donors_.push_back(donor);
    }

    embedding_ = store_.matrix("model.embed_tokens.weight", vocab_, hidden_, WeightStore::Access::kRows);
    norm_ = store_.floats("model.norm.weight", {hidden_});
    pre_projection_ = store_.matrix("pre_projection.weight", hidden_, 2 * int64_t(target_hidden_));
    post_projection_ = store_.matrix("post_projection.weight", target_hidden_, hidden_);
    if (top.get_bool("use_ordered_embeddings", false)) {
      const int centroids = top.get_int("num_centroids", 2048);
      top_k_ = top.get_int("centroid_intermediate_top_k", 32);
      if (centroids <= 0 || vocab_ % centroids != 0 || top_k_ <= 0 || top_k_ > centroids)
        top.error(ErrorKind::kBadInput, "num_centroids {} must divide vocab_size {} and centroid_intermediate_top_k {} be in 1..{}",
                  centroids, vocab_, top_k_, centroids);
      centroids_ = store_.matrix("masked_embedding.centroids.weight", centroids, hidden_);
      const RawTensor* order = ckpt_->find_raw("masked_embedding.token_ordering");
      if (!order || order->dtype != "I64" || order->shape != std::vector<int64_t>{vocab_})
        top.error(ErrorKind::kBadInput, "masked_embedding.token_ordering must be an I64 tensor of shape [{}]", vocab_);
      const int64_t* ids = static_cast<const int64_t*>(order->data);
      ordering_.resize(size_t(vocab_));
      for (int i = 0; i < vocab_; ++i) {
        if (ids[i] < 0 || ids[i] >= vocab_)
          top.error(ErrorKind::kBadInput, "masked_embedding.token_ordering[{}] = {} is not a token id", i, ids[i]);
        ordering_[size_t(i)] = int32_t(ids[i]);
      }
      per_centroid_ = vocab_ / centroids;
    }
    ckpt_.reset();  // weights are copied
  }

  int default_draft_tokens() const override { return default_tokens_; }
  int num_layers() const override { return int(layers_.size()); }

  void step(std::span<const AssistantRow> batch, float* logits, float* h_next) override {
    const int n = int(batch.size());
    if (n == 0) return;
    const size_t Ht = size_t(target_hidden_), Hd = size_t(hidden_);
    cat_.resize(size_t(n) * 2 * Ht);
    positions_.resize(size_t(n));
    segments_.resize(size_t(n));
    tokens_.resize(size_t(n));
    for (int r = 0; r < n; ++r) {
      const AssistantRow& row = batch[size_t(r)];
      const int p = row.target->length() - 1;
      if (p < 0) fail(ErrorKind::kInternal, "Gemma 4 assistant: the target holds no tokens");
      tokens_[size_t(r)] = row.token;
      positions_[size_t(r)] = p;
      StateSegment& seg = segments_[size_t(r)];
      seg = StateSegment{};
      seg.state = row.target;
      seg.row0 = r;
      seg.n = 1;
      seg.pos = p;
      seg.read_only = true;
    }
    // [the TARGET's embedding, scaled like its input ; h] per row.
    e_.resize(size_t(n) * Ht);
    embed_rows(target_.embedding(), tokens_.data(), n, e_.data());
    for (int r = 0; r < n; ++r) {
      float* row = cat_.data() + size_t(r) * 2 * Ht;
      const float* e = e_.data() + size_t(r) * Ht;
      for (size_t i = 0; i < Ht; ++i) row[i] = e[i] * target_.config().embedding_scale;
      std::copy_n(batch[size_t(r)].h, Ht, row + Ht);
    }
    u_.resize(size_t(n) * Hd);
    matmul(pre_projection_, cat_.data(), n, u_.data());
    BlockRows rows{u_.data(), n, positions_.data(), segments_};
    for (size_t l = 0; l < layers_.size(); ++l) layers_[l]->forward(donors_[l], rows, scratch_);
    n_.resize(size_t(n) * Hd);
    rms_norm(u_.data(), norm_, n, hidden_, eps_, n_.data());

    if (ordering_.empty()) {
      matmul(embedding_, n_.data(), n, logits);
    } else {
      for (int r = 0; r < n; ++r) masked_logits(n_.data() + size_t(r) * Hd, logits + size_t(r) * size_t(vocab_));
    }
    if (softcap_ > 0) softcap(logits, int64_t(n) * vocab_, softcap_);
    matmul(post_projection_, n_.data(), n, h_next);
  }

 private:
  // Only the tokens of the top_k_ centroids are scored (E_d rows by canonical id).
  // n: one normed row [H_d]; logits: its row [vocab].
  void masked_logits(const float* n, float* logits) {
    const int C = int(centroids_.rows);
    scores_.resize(size_t(C));
    matmul(centroids_, n, 1, scores_.data());
    order_.resize(size_t(C));
    std::iota(order_.begin(), order_.end(), 0);
    std::partial_sort(order_.begin(), order_.begin() + top_k_, order_.end(), [&](int a, int b) {
      return scores_[size_t(a)] > scores_[size_t(b)] || (scores_[size_t(a)] == scores_[size_t(b)] && a < b);
    });
    const size_t row_bytes = dtype_row_bytes(embedding_.dtype, embedding_.cols);
    float lowest = INFINITY;
    candidates_.clear();
    for (int t = 0; t < top_k_; ++t)
      for (int j = 0; j < per_centroid_; ++j) candidates_.push_back(ordering_[size_t(order_[size_t(t)]) * per_centroid_ + j]);
    kept_.resize(candidates_.size());
    for (size_t c = 0; c < candidates_.size(); ++c) {
      WeightMatrix row = embedding_;
      row.rows = 1;
      row.data = static_cast<const unsigned char*>(embedding_.data) + size_t(candidates_[c]) * row_bytes;
      matmul(row, n, 1, &kept_[c]);
      lowest = std::min(lowest, kept_[c]);
    }
    std::fill_n(logits, vocab_, lowest - 1.0f);
    for (size_t c = 0; c < candidates_.size(); ++c) logits[candidates_[c]] = kept_[c];
  }

  std::unique_ptr<Checkpoint> ckpt_;
  WeightStore store_;
  const DecoderModel& target_;
  int vocab_ = 0, hidden_ = 0, target_hidden_ = 0;
  float eps_ = 1e-6f, softcap_ = 0.0f;
  int default_tokens_ = 4;
  std::vector<std::unique_ptr<Block>> layers_;  // query-only, layer l reads target layer donors_[l]
  std::vector<int> donors_;
  WeightMatrix embedding_;        // model.embed_tokens [V, H_d] (the tied head)
  const float* norm_ = nullptr;   // model.norm [H_d]
  WeightMatrix pre_projection_;   // [H_d, 2 H_t]: [scaled target embedding ; target hidden]
  WeightMatrix post_projection_;  // [H_t, H_d]
  WeightMatrix centroids_;        // masked_embedding.centroids [C, H_d]
  std::vector<int32_t> ordering_;  // masked_embedding.token_ordering [V]: centroid c owns ids [c * V/C, (c+1) * V/C)
  int top_k_ = 0, per_centroid_ = 0;
  BlockScratch scratch_;
  std::vector<float> e_, cat_, u_, n_, scores_, kept_;
  std::vector<int> order_;
  std::vector<int32_t> positions_, tokens_;
  std::vector<StateSegment> segments_;
  std::vector<int32_t> candidates_;
};

}  // namespace

bool Gemma4Assistant::is_gemma4_assistant(const nlohmann::json& config) {
  return first_architecture(config) == "Gemma4AssistantForCausalLM" ||
         (config.is_object() && config.value("model_type", "") == "gemma4_assistant");
}

std::unique_ptr<Gemma4Assistant> Gemma4Assistant::load(const std::string& dir, const Model& target) {
  auto* decoder = dynamic_cast<const DecoderModel*>(&target);
  if (!decoder) fail(ErrorKind::kInternal, "Gemma 4 assistant: unsupported target model type");
  return std::make_unique<Gemma4AssistantImpl>(Checkpoint::open(dir), *decoder);
}

}  // namespace nextn
