// state/sequence_state.cc — per-layer caches and states of one sequence, and the
// one rollback contract over them.
#include "state/sequence_state.h"

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace nextn {

SequenceState::SequenceState(const std::vector<LayerStateSpec>& layers, int max_tokens, const KvOptions& options)
    : options_(options), max_tokens_(max_tokens) {
  // Attention layers grouped by shape: one KvCache per distinct shape.
  struct Group {
    LayerStateSpec shape;
    std::vector<int> layers;
  };
  std::vector<Group> groups;
  layers_.resize(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerStateSpec& s = layers[l];
    LayerRef& ref = layers_[l];
    ref.kind = s.kind;
    if (s.kind == LayerStateSpec::Kind::kRecurrent) {
      if (s.recurrent_floats == 0) fail(ErrorKind::kInternal, "layer {}: recurrent state of size 0", l);
      ref.index = int(recurrent_.size());
      recurrent_.push_back(std::make_unique<RecurrentState>(s.recurrent_floats, s.recurrent_record_floats));
    } else if (s.kind == LayerStateSpec::Kind::kAttention) {
      auto same = [&](const Group& g) {
        return g.shape.heads == s.heads && g.shape.kv_heads == s.kv_heads && g.shape.head_dim == s.head_dim &&
               g.shape.window == s.window;
      };
      auto it = std::find_if(groups.begin(), groups.end(), same);
      if (it == groups.end()) it = groups.insert(groups.end(), Group{s, {}});
      ref.index = int(it - groups.begin());
      ref.layer = int(it->layers.size());
      it->layers.push_back(int(l));
    }
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].kind != LayerStateSpec::Kind::kReadsKv) continue;
    const int donor = layers[l].reads_layer;
    if (donor < 0 || donor >= int(l) || layers[size_t(donor)].kind != LayerStateSpec::Kind::kAttention)
      fail(ErrorKind::kInternal, "layer {} reads the KV of layer {}, which is not an earlier attention layer", l, donor);
    layers_[l].index = layers_[size_t(donor)].index;
    layers_[l].layer = layers_[size_t(donor)].layer;
  }
  max_rows_per_forward_ = std::numeric_limits<int>::max();
  for (const Group& g : groups) {
    KvShape shape;
    if (g.shape.window > 0) {
      const int slack = std::max(kMinWindowSlackRows, g.shape.window);
      shape.window = g.shape.window;
      shape.ring_tokens = g.shape.window + slack;
      max_rows_per_forward_ = std::min(max_rows_per_forward_, slack);
    }
    shape.n_layers = int(g.layers.size());
    shape.n_heads = g.shape.heads;
    shape.n_kv_heads = g.shape.kv_heads;
    shape.head_dim = g.shape.head_dim;
    shape.max_tokens = max_tokens;
    caches_.push_back(make_kv_cache(shape, options));
  }
}

SequenceState::~SequenceState() = default;

bool SequenceState::can_return_to(int n) const {
  if (n < 0 || n > length_) return false;
  if (n == length_ || n == 0) return true;
  for (auto& c : caches_)
    if (n < c->min_truncate_length()) return false;
  if (recurrent_.empty()) return true;
  return snapshot_base_ >= 0 && n >= snapshot_base_ && n <= snapshot_base_ + snapshot_rows_;
}

int SequenceState::longest_returnable(int n) const {
  // Every length a recurrent state can reach is 0, length() or inside the snapshotted
  // rows, and those rows end at length() or beyond; a window ring reaches every length
  // from its min_truncate_length() on: below the reachable span only 0 is left.
  n = std::clamp(n, 0, length_);
  return can_return_to(n) ? n : 0;
}

void SequenceState::return_to(int n) {
  if (pending_ >= 0) fail(ErrorKind::kInternal, "sequence state: return_to({}) during a forward", n);
  if (!can_return_to(n))
    fail(ErrorKind::kInternal, "sequence state: cannot return to length {} (length {}, snapshots {}..{})", n, length_,
         snapshot_base_, snapshot_base_ + snapshot_rows_);
  if (n == length_) return;
  for (auto& c : caches_) c->truncate(n);
  if (n == 0) {
    for (auto& r : recurrent_) r->reset();
    snapshot_base_ = -1;
  } else if (!recurrent_.empty()) {
    for (auto& r : recurrent_) r->keep(n - snapshot_base_);
  }
  length_ = n;
}

void SequenceState::begin_rows(int n, bool snapshots) {
  if (pending_ >= 0) fail(ErrorKind::kInternal, "sequence state: a forward is already in progress");
  if (n < 0 || length_ + n > max_tokens_)
    fail(ErrorKind::kResource, "context is full: {} + {} tokens exceed the capacity of {}", length_, n, max_tokens_);
  if (n > max_rows_per_forward_)
    fail(ErrorKind::kInternal, "sequence state: {} rows in one forward, the window rings hold {}", n,
         max_rows_per_forward_);
  pending_ = n;
  pending_snapshots_ = snapshots && !recurrent_.empty() && n > 0;
  for (auto& r : recurrent_) r->begin(n, pending_snapshots_);
}

void SequenceState::end_rows() {
  if (pending_ < 0) fail(ErrorKind::kInternal, "sequence state: end_rows without begin_rows");
  for (auto& r : recurrent_) r->end();
  if (pending_snapshots_) {
    snapshot_base_ = length_;
    snapshot_rows_ = pending_;
  } else if (pending_ > 0) {
    snapshot_base_ = -1;  // the planes were updated in place: earlier snapshots are gone
    snapshot_rows_ = 0;
  }
  length_ += pending_;
  pending_ = -1;
  pending_snapshots_ = false;
}

bool SequenceState::has_attention(int layer) const {
  return layer >= 0 && layer < num_layers() && layers_[size_t(layer)].kind != LayerStateSpec::Kind::kRecurrent;
}

AttentionSlot SequenceState::attention(int layer) const {
  if (layer < 0 || layer >= num_layers() || layers_[size_t(layer)].kind == LayerStateSpec::Kind::kRecurrent)
    fail(ErrorKind::kInternal, "sequence state: layer {} has no attention cache", layer);
  const LayerRef& ref = layers_[size_t(layer)];
  return {caches_[size_t(ref.index)].get(), ref.layer, ref.kind == LayerStateSpec::Kind::kAttention};
}

RecurrentState& SequenceState::recurrent(int layer) {
  if (layer < 0 || layer >= num_layers() || layers_[size_t(layer)].kind != LayerStateSpec::Kind::kRecurrent)
    fail(ErrorKind::kInternal, "sequence state: layer {} has no recurrent state", layer);
  return *recurrent_[size_t(layers_[size_t(layer)].index)];
}

size_t SequenceState::attention_bytes() const {
  size_t n = 0;
  for (auto& c : caches_) n += c->bytes_used();
  return n;
}

size_t SequenceState::attention_f16_equivalent_bytes() const {
  size_t n = 0;
  for (auto& c : caches_) n += c->f16_equivalent_bytes();
  return n;
}

size_t SequenceState::recurrent_bytes() const {
  size_t n = 0;
  for (auto& r : recurrent_) n += r->current_bytes();
  return n;
}

size_t SequenceState::snapshot_bytes() const {
  size_t n = 0;
  for (auto& r : recurrent_) n += r->snapshot_bytes();
  return n;
}

}  // namespace nextn
