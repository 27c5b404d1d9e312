// model/decoder_model.cc — loading and the batched forward pass of DecoderModel.
#include "model/decoder_model.h"

#include <algorithm>
#include <cmath>

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
  block_shape_ = flat_block_shape(c);  // MiMo / DeepSeek MTP layers and assistants use it
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
      layers_.push_back(make_attention_block(c, spec, store_, p));
    }
    state_layout_.push_back(layer_state_spec(spec));
  }
  size_t stage_bytes = store_.matrix_bytes();
  if (arch.make_input_stage) input_stage_ = arch.make_input_stage(c, store_);
  // A decode row reads one row of an input stage's tables, not the tables.
  stage_bytes = store_.matrix_bytes() - stage_bytes;
  final_norm_ = store_.floats(prefix + "norm.weight", {c.hidden_size}, c.norm_offset);
  if (c.tie_word_embeddings) {
    lm_head_ = embedding_;
    weight_bytes_ = store_.matrix_bytes();  // the embedding is read as the lm_head
  } else {
    lm_head_ = store_.matrix("lm_head.weight", c.vocab_size, c.hidden_size);
    weight_bytes_ = store_.matrix_bytes() - embedding_bytes;
  }
  if (input_stage_) weight_bytes_ = weight_bytes_ - stage_bytes + input_stage_->bytes_per_row();
  weight_bytes_ -= store_.unread_bytes();  // a decode row reads top_k of the routed experts

  if (c.mtp_layout != MtpLayout::kNone && c.num_mtp_layers > 0) mtp_ = make_mtp_head(mtp_head_spec(c), *this, store_);
  // With copied weights the mapping is no longer needed (unless a row table lives there).
  if (copy_weights_ && !store_.uses_mapping()) ckpt_.reset();
  log_debug("loaded {} ({} layers, hidden {}, {} MiB of weights)", dir_, c.num_layers, c.hidden_size,
            weight_bytes_ >> 20);
}

DecoderModel::~DecoderModel() = default;

LayerStateSpec layer_state_spec(const LayerSpec& layer) {
  LayerStateSpec s;
  if (layer.mixer == MixerKind::kGatedDeltaNet) {
    s.kind = LayerStateSpec::Kind::kRecurrent;
    s.recurrent_floats = layer.delta_net.state_floats() + layer.delta_net.conv_floats();
    s.recurrent_record_floats = layer.delta_net.record_floats();
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
  bool fits = true;
  for (const SequenceRows& seq : sequences)
    if (seq.state && int(seq.tokens.size()) > seq.state->max_rows_per_forward()) fits = false;
  if (fits) return forward_rows(sequences, result);
  // Sliding-window rings hold window + one forward's rows: a longer prefill runs
  // sequence by sequence in pieces, each piece's logit / hidden rows copied into place.
  const size_t H = size_t(config_.hidden_size), V = size_t(config_.vocab_size);
  size_t n_logits = 0, n_hidden = 0;
  for (const SequenceRows& seq : sequences) n_logits += seq.logit_rows.size(), n_hidden += seq.hidden_rows.size();
  result.logits.resize(n_logits * V);
  result.hidden_pre.resize(n_hidden * H);
  result.hidden_post.resize(n_hidden * H);
  const size_t S = streams_.size() * H;  // stream floats per hidden row
  result.streams.resize(n_hidden * S);
  size_t logit_base = 0, hidden_base = 0;
  ForwardResult part;
  for (const SequenceRows& seq : sequences) {
    const int n = int(seq.tokens.size());
    const int step = seq.state ? std::max(1, seq.state->max_rows_per_forward()) : std::max(1, n);
    for (int begin = 0, count = 0; begin < n; begin += count) {
      count = std::min(step, n - begin);
      if (config_.image_bidirectional)  // an image that sees itself stays in one piece
        for (const EmbeddingSpan& e : seq.embeddings)
          if (e.row < begin + count && e.row + e.count > begin + count) {
            if (e.row <= begin)
              fail(ErrorKind::kUnsupported,
                   "an image of {} tokens is longer than the {} rows one forward call takes on this model (its "
                   "sliding window)", e.count, step);
            count = e.row - begin;
          }
      SequenceRows piece;
      piece.state = seq.state;
      piece.tokens = seq.tokens.subspan(size_t(begin), size_t(count));
      piece.snapshots = seq.snapshots;
      piece.position_offset = seq.position_offset;
      if (!seq.positions.empty()) piece.positions = seq.positions.subspan(size_t(begin) * 3, size_t(count) * 3);
      for (const EmbeddingSpan& e : seq.embeddings) {  // the part of each span inside the piece
        const int lo = std::max(e.row, begin), hi = std::min(e.row + e.count, begin + count);
        if (lo < hi) piece.embeddings.push_back({lo - begin, hi - lo, e.data + size_t(lo - e.row) * H});
      }
      std::vector<size_t> logit_to, hidden_to;
      for (size_t i = 0; i < seq.logit_rows.size(); ++i)
        if (seq.logit_rows[i] >= begin && seq.logit_rows[i] < begin + count)
          piece.logit_rows.push_back(seq.logit_rows[i] - begin), logit_to.push_back(logit_base + i);
      for (size_t i = 0; i < seq.hidden_rows.size(); ++i)
        if (seq.hidden_rows[i] >= begin && seq.hidden_rows[i] < begin + count)
          piece.hidden_rows.push_back(seq.hidden_rows[i] - begin), hidden_to.push_back(hidden_base + i);
      forward_rows(std::span<SequenceRows>(&piece, 1), part);
      for (size_t i = 0; i < logit_to.size(); ++i)
        std::copy_n(part.logits.data() + i * V, V, result.logits.data() + logit_to[i] * V);
      for (size_t i = 0; i < hidden_to.size(); ++i) {
        std::copy_n(part.hidden_pre.data() + i * H, H, result.hidden_pre.data() + hidden_to[i] * H);
        std::copy_n(part.hidden_post.data() + i * H, H, result.hidden_post.data() + hidden_to[i] * H);
        std::copy_n(part.streams.data() + i * S, S, result.streams.data() + hidden_to[i] * S);
      }
    }
    logit_base += seq.logit_rows.size();
    hidden_base += seq.hidden_rows.size();
  }
}

void DecoderModel::forward_rows(std::span<SequenceRows> sequences, ForwardResult& result) {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  // Lay out the rows of every sequence one after another.
  int n_rows = 0, n_logits = 0, n_hidden = 0;
  bool any_axes = false;
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
    if (!seq.positions.empty() && seq.positions.size() != size_t(n) * 3)
      fail(ErrorKind::kInternal, "forward: {} positions for {} rows (3 per row)", seq.positions.size(), n);
    int next_row = 0;
    for (const EmbeddingSpan& e : seq.embeddings) {
      if (e.row < next_row || e.count < 0 || e.row + e.count > n || (e.count > 0 && !e.data))
        fail(ErrorKind::kInternal, "forward: embedding rows [{}, {}) out of order or outside 0..{}", e.row,
             e.row + e.count, n);
      next_row = e.row + e.count;
    }
    if (!seq.positions.empty()) any_axes = true;
    if (n > 0) segments_.push_back({seq.state, n_rows, n, pos, seq.snapshots});
    n_rows += n;
    n_logits += static_cast<int>(seq.logit_rows.size());
    n_hidden += static_cast<int>(seq.hidden_rows.size());
  }
  result.logits.resize(static_cast<size_t>(n_logits) * V);
  result.hidden_pre.resize(static_cast<size_t>(n_hidden) * H);
  result.hidden_post.resize(static_cast<size_t>(n_hidden) * H);
  result.streams.resize(static_cast<size_t>(n_hidden) * streams_.size() * H);
  if (n_rows == 0) return;

  if (tokens_.size() < size_t(n_rows)) tokens_.resize(n_rows), positions_.resize(n_rows);
  if (x_.size() < size_t(n_rows) * H) x_.resize(size_t(n_rows) * H);
  if (any_axes && axes_.size() < size_t(n_rows) * 3) axes_.resize(size_t(n_rows) * 3);
  {
    int row = 0;
    for (const SequenceRows& seq : sequences) {
      const int pos = seq.state->length() + seq.position_offset;
      for (size_t i = 0; i < seq.tokens.size(); ++i, ++row) {
        tokens_[row] = seq.tokens[i];
        if (seq.positions.empty()) {
          positions_[row] = pos + static_cast<int>(i);
          if (any_axes) std::fill_n(axes_.data() + size_t(row) * 3, 3, positions_[row]);
        } else {
          positions_[row] = seq.positions[i * 3];
          std::copy_n(seq.positions.data() + i * 3, 3, axes_.data() + size_t(row) * 3);
        }
      }
    }
  }
  embed_rows(embedding_, tokens_.data(), n_rows, x_.data());
  if (config_.embedding_scale != 1.0f)
    for (size_t i = 0; i < size_t(n_rows) * H; ++i) x_[i] *= config_.embedding_scale;
  {  // rows from outside the embedding (image rows) replace the embedded ones
    size_t row0 = 0;
    for (const SequenceRows& seq : sequences) {
      for (const EmbeddingSpan& e : seq.embeddings)
        std::copy_n(e.data, size_t(e.count) * H, x_.data() + (row0 + size_t(e.row)) * H);
      row0 += seq.tokens.size();
    }
  }
  for (const StateSegment& seg : segments_) seg.state->begin_rows(seg.n, seg.snapshots);
  BlockRows rows{x_.data(), n_rows, positions_.data(), segments_};
  rows.tokens = tokens_.data();
  if (any_axes) rows.axes = axes_.data();
  if (config_.image_bidirectional) {  // where each image row's image ends (BlockRows::image_end)
    bool any_image = false;
    int row0 = 0;
    for (const SequenceRows& seq : sequences) {
      for (const EmbeddingSpan& e : seq.embeddings) {
        if (!any_image) image_end_.assign(size_t(n_rows), -1), any_image = true;
        std::fill_n(image_end_.data() + row0 + e.row, e.count, row0 + e.row + e.count);
      }
      row0 += int(seq.tokens.size());
    }
    if (any_image) rows.image_end = image_end_.data();
  }
  if (input_stage_) {
    const int64_t stride = input_stage_->stride();
    if (layer_inputs_.size() < size_t(n_rows) * stride) layer_inputs_.resize(size_t(n_rows) * stride);
    input_stage_->forward(tokens_.data(), x_.data(), n_rows, layer_inputs_.data());
    rows.layer_inputs = layer_inputs_.data();
    rows.layer_input_stride = stride;
  }
  auto capture = [&](int stream) {
    if (n_hidden == 0) return;
    for (size_t slot = 0; slot < streams_.size(); ++slot)
      if (streams_[slot] == stream) copy_stream(sequences, int(slot), result);
  };
  for (int l = 0; l < config_.num_layers; ++l) {
    capture(l);
    layers_[size_t(l)]->forward(l, rows, scratch_);
  }
  capture(config_.num_layers);
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
    if (const float cap = config_.final_logit_softcap; cap > 0)
      softcap(result.logits.data(), int64_t(result.logits.size()), cap);
  }
}

void DecoderModel::capture_streams(std::vector<int> streams) {
  for (int l : streams)
    if (l < 0 || l > config_.num_layers)
      fail(ErrorKind::kBadInput, "{}: residual stream {} asked for, the model has streams 0..{}", dir_, l,
           config_.num_layers);
  streams_ = std::move(streams);
}

void DecoderModel::copy_stream(std::span<SequenceRows> sequences, int slot, ForwardResult& result) const {
  const size_t H = size_t(config_.hidden_size), S = streams_.size() * H;
  size_t out = 0, row0 = 0;
  for (const SequenceRows& seq : sequences) {
    for (int r : seq.hidden_rows)
      std::copy_n(x_.data() + (row0 + size_t(r)) * H, H, result.streams.data() + (out++) * S + size_t(slot) * H);
    row0 += seq.tokens.size();
  }
}

RoutedStats DecoderModel::routed_stats() const {
  RoutedStats sum;
  for (const auto& layer : layers_) layer->add_routed_stats(sum);
  return sum;
}

}  // namespace nextn
