// model/decoder_model.cc — loading and the batched forward pass of DecoderModel.
#include "model/decoder_model.h"

#include <algorithm>

#include "model/architecture.h"
#include "model/rope_table.h"
#include "util/error.h"
#include "util/log.h"

namespace nextn {

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  return std::make_unique<DecoderModel>(Checkpoint::open(dir), options);
}

DecoderModel::DecoderModel(std::unique_ptr<Checkpoint> ckpt, const LoadOptions& options)
    : config_(parse_model_config(*ckpt)),
      dir_(ckpt->dir()),
      copy_weights_(options.copy_weights),
      ckpt_(std::move(ckpt)),
      store_(*ckpt_, options.copy_weights) {
  const ModelConfig& c = config_;
  const Architecture& arch = architecture_named(c.architecture);
  // The flat shape (MiMo / DeepSeek MTP layers and assistants use it).
  block_shape_.hidden = c.hidden_size;
  block_shape_.heads = c.num_heads;
  block_shape_.kv_heads = c.num_kv_heads;
  block_shape_.head_dim = c.head_dim;
  block_shape_.intermediate = c.intermediate_size;
  block_shape_.qkv_bias = c.qkv_bias;
  block_shape_.qk_norm = c.qk_norm;
  block_shape_.eps = static_cast<float>(c.rms_norm_eps);
  inv_freq_ = rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling);

  const std::string& prefix = c.weight_prefix;
  embedding_ = store_.matrix(prefix + "embed_tokens.weight", c.vocab_size, c.hidden_size);
  size_t embedding_bytes = store_.matrix_bytes();
  layers_.reserve(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerSpec& spec = c.layers[size_t(l)];
    const std::string p = prefix + "layers." + std::to_string(l) + ".";
    if (arch.make_block) {
      layers_.push_back(arch.make_block(c, spec, store_, p));
    } else {
      const AttentionSpec& a = spec.attention;
      layers_.push_back(make_attention_block(store_, p, attention_block_shape(c, spec),
                                             rope_inv_freq(a.head_dim, a.rope_theta, c.rope_scaling)));
    }
    state_layout_.push_back(layer_state_spec(spec));
  }
  final_norm_ = store_.floats(prefix + "norm.weight", {c.hidden_size}, c.norm_offset);
  if (c.tie_word_embeddings) {
    lm_head_ = embedding_;
    weight_bytes_ = store_.matrix_bytes();  // the embedding is read as the lm_head
  } else {
    lm_head_ = store_.matrix("lm_head.weight", c.vocab_size, c.hidden_size);
    weight_bytes_ = store_.matrix_bytes() - embedding_bytes;
  }

  if (c.mtp_layout != MtpLayout::kNone && c.num_mtp_layers > 0) {
    MtpHeadConfig spec;
    spec.layout = c.mtp_layout;
    spec.num_layers = c.num_mtp_layers;
    spec.first_index = c.mtp_layout == MtpLayout::kDeepSeek ? c.num_layers : 0;
    spec.block = block_shape_;
    spec.inv_freq = inv_freq_;
    spec.config = &config_;
    spec.arch = &arch;
    for (const LayerSpec& l : c.layers)
      if (l.mixer == MixerKind::kAttention) spec.layer = l;  // the MTP layer is full attention, as the trunk's
    mtp_ = make_mtp_head(spec, *this, store_);
  }
  // With copied weights the mapping is no longer needed.
  if (copy_weights_) ckpt_.reset();
  log_debug("loaded {} ({} layers, hidden {}, {} MiB of weights)", dir_, c.num_layers, c.hidden_size,
            weight_bytes_ >> 20);
}

DecoderModel::~DecoderModel() = default;

LayerStateSpec layer_state_spec(const LayerSpec& layer) {
  LayerStateSpec s;
  if (layer.mixer == MixerKind::kGatedDeltaNet) {
    s.kind = LayerStateSpec::Kind::kRecurrent;
    s.recurrent_floats = layer.delta_net.state_floats() + layer.delta_net.conv_floats();
    return s;
  }
  const AttentionSpec& a = layer.attention;
  s.kind = a.kv_source >= 0 ? LayerStateSpec::Kind::kReadsKv : LayerStateSpec::Kind::kAttention;
  s.heads = a.heads;
  s.kv_heads = a.kv_heads;
  s.head_dim = a.head_dim;
  s.window = layer.mixer == MixerKind::kSlidingAttention ? a.window : 0;
  s.reads_layer = a.kv_source;
  return s;
}

std::unique_ptr<SequenceState> DecoderModel::new_state(int max_tokens, const KvOptions& options) const {
  return std::make_unique<SequenceState>(state_layout_, max_tokens, options);
}

void DecoderModel::forward(std::span<SequenceRows> sequences, ForwardResult& result) {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  // Lay out the rows of every sequence one after another.
  int n_rows = 0, n_logits = 0, n_hidden = 0;
  segments_.clear();
  for (const SequenceRows& seq : sequences) {
    if (!seq.state) fail(ErrorKind::kInternal, "forward: a sequence has no state");
    if (seq.state->num_layers() != config_.num_layers)
      fail(ErrorKind::kInternal, "forward: a state of {} layers for a model of {}", seq.state->num_layers(),
           config_.num_layers);
    const int n = static_cast<int>(seq.tokens.size());
    const int pos = seq.state->length();
    if (pos + n > seq.state->max_tokens())
      fail(ErrorKind::kResource, "context is full: {} + {} tokens exceed the KV cache capacity of {}", pos, n,
           seq.state->max_tokens());
    for (int r : seq.logit_rows)
      if (r < 0 || r >= n) fail(ErrorKind::kInternal, "forward: logit row {} out of range (0..{})", r, n - 1);
    for (int r : seq.hidden_rows)
      if (r < 0 || r >= n) fail(ErrorKind::kInternal, "forward: hidden row {} out of range (0..{})", r, n - 1);
    if (n > 0) segments_.push_back({seq.state, n_rows, n, pos, seq.snapshots});
    n_rows += n;
    n_logits += static_cast<int>(seq.logit_rows.size());
    n_hidden += static_cast<int>(seq.hidden_rows.size());
  }
  result.logits.resize(static_cast<size_t>(n_logits) * V);
  result.hidden_pre.resize(static_cast<size_t>(n_hidden) * H);
  result.hidden_post.resize(static_cast<size_t>(n_hidden) * H);
  if (n_rows == 0) return;

  if (tokens_.size() < size_t(n_rows)) tokens_.resize(n_rows), positions_.resize(n_rows);
  if (x_.size() < size_t(n_rows) * H) x_.resize(size_t(n_rows) * H);
  {
    int row = 0;
    for (const SequenceRows& seq : sequences) {
      const int pos = seq.state->length();
      for (size_t i = 0; i < seq.tokens.size(); ++i, ++row) {
        tokens_[row] = seq.tokens[i];
        positions_[row] = pos + static_cast<int>(i);
      }
    }
  }
  embed_rows(embedding_, tokens_.data(), n_rows, x_.data());
  for (const StateSegment& seg : segments_) seg.state->begin_rows(seg.n, seg.snapshots);
  BlockRows rows{x_.data(), n_rows, positions_.data(), segments_};
  for (int l = 0; l < config_.num_layers; ++l) layers_[size_t(l)]->forward(l, rows, scratch_);
  for (const StateSegment& seg : segments_) seg.state->end_rows();

  // Hidden states before / after the final norm.
  const float eps = block_shape_.eps;
  if (n_hidden > 0) {
    int out = 0, row0 = 0;
    for (const SequenceRows& seq : sequences) {
      for (int r : seq.hidden_rows) std::copy_n(x_.data() + (row0 + r) * H, H, result.hidden_pre.data() + (out++) * H);
      row0 += static_cast<int>(seq.tokens.size());
    }
    rms_norm(result.hidden_pre.data(), final_norm_, n_hidden, H, eps, result.hidden_post.data());
  }
  // Logits only for the rows asked for, all in one lm_head matmul.
  if (n_logits > 0) {
    if (gathered_.size() < size_t(n_logits) * H) gathered_.resize(size_t(n_logits) * H);
    int out = 0, row0 = 0;
    for (const SequenceRows& seq : sequences) {
      for (int r : seq.logit_rows) std::copy_n(x_.data() + (row0 + r) * H, H, gathered_.data() + (out++) * H);
      row0 += static_cast<int>(seq.tokens.size());
    }
    rms_norm(gathered_.data(), final_norm_, n_logits, H, eps, gathered_.data());
    matmul(lm_head_, gathered_.data(), n_logits, result.logits.data());
  }
}

}  // namespace nextn
