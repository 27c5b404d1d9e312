// state/sequence_state.h — everything one sequence keeps between forward passes, per
// layer: an attention KV cache (any kv/ storage type, with the layer's own shape), a
// recurrent state (Gated DeltaNet: S and the conv window), or nothing of its own (a
// layer reading another layer's KV, Gemma 4).
//
// One rollback contract for every kind of layer: return_to(n) — "be as you were when
// the sequence was n tokens long". Attention caches truncate. Recurrent states cannot
// be un-applied, so a forward that marks its rows `snapshots` (a speculative verify)
// logs its rows and leaves its plane as of its first row, and return_to keeps that
// plane plus the accepted rows' log, which the next forward re-applies into the plane
// (no copy). can_return_to(n) says which lengths are reachable; the engine's prefix
// cache only reuses prefixes at such lengths (longest_returnable).
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "state/recurrent_state.h"

namespace nextn {

// What one layer keeps per sequence.
struct LayerStateSpec {
  enum class Kind {
    kAttention,  // own KV cache rows (heads/kv_heads/head_dim below)
    kReadsKv,    // no storage: attends over layer `reads_layer`'s cache (KV sharing)
    kRecurrent,  // a fixed-size recurrent state of `recurrent_floats` floats
  };
  Kind kind = Kind::kAttention;
  int heads = 0;     // kAttention: query heads
  int kv_heads = 0;  // kAttention: key/value heads
  int head_dim = 0;  // kAttention
  int window = 0;    // kAttention: sliding window (0: every earlier position is kept)
  int reads_layer = -1;         // kReadsKv
  size_t recurrent_floats = 0;         // kRecurrent: one state
  size_t recurrent_record_floats = 0;  // kRecurrent: one logged row (RecurrentState)
};

// A layer's place in the attention caches: layer `layer` of `cache`.
struct AttentionSlot {
  KvCache* cache = nullptr;
  int layer = 0;
  bool owns = true;  // false: the rows belong to another layer (do not append)
};

// Sliding-window caches keep the window plus room for one forward's rows: at least
// this many (a speculative verify is at most kMaxDraftsPerStep + 1 = 17 rows), and
// at least the window itself, so prefill runs in pieces of `window` rows.
constexpr int kMinWindowSlackRows = 32;

class SequenceState {
 public:
  // Attention layers of the same shape share one KvCache (one layer of it each), so an
  // attention-only model has exactly one cache, as before.
  SequenceState(const std::vector<LayerStateSpec>& layers, int max_tokens, const KvOptions& options);
  ~SequenceState();

  int length() const { return length_; }
  int max_tokens() const { return max_tokens_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const KvOptions& kv_options() const { return options_; }
  bool has_recurrent_layers() const { return !recurrent_.empty(); }
  // The most rows one forward may add (sliding-window rings bound it; else unlimited).
  int max_rows_per_forward() const { return max_rows_per_forward_; }

  // ---- rollback ------------------------------------------------------------------
  // Whether return_to(n) is possible: n <= length(), and for recurrent layers n is 0,
  // length(), or inside the last snapshotted forward's rows; sliding-window rings
  // must still hold the window before n (n >= their min_truncate_length()).
  bool can_return_to(int n) const;
  // The largest m <= n that can_return_to(m) (0 at worst).
  int longest_returnable(int n) const;
  // Becomes the state of the first n tokens. kInternal error when !can_return_to(n).
  void return_to(int n);

  // ---- the forward protocol (called by the model) --------------------------------
  // Rows [length(), length() + n) are about to be added; with `snapshots` every row's
  // recurrent state is kept (return_to any length in between afterwards).
  void begin_rows(int n, bool snapshots);
  // The rows are in: length() grows by n.
  void end_rows();

  // Whether `layer` attends (own rows or another layer's); recurrent layers do not.
  bool has_attention(int layer) const;
  AttentionSlot attention(int layer) const;
  RecurrentState& recurrent(int layer);

  // ---- memory (for /health, /metrics, bench) -------------------------------------
  size_t attention_bytes() const;   // KV rows stored now
  size_t recurrent_bytes() const;   // the current recurrent state of every layer
  size_t snapshot_bytes() const;    // row logs kept for rollback
  size_t bytes_used() const { return attention_bytes() + recurrent_bytes() + snapshot_bytes(); }
  size_t attention_f16_equivalent_bytes() const;  // the KV rows in F16 (compression ratio)

 private:
  struct LayerRef {
    LayerStateSpec::Kind kind;
    int index = 0;  // attention: cache index; recurrent: recurrent_ index
    int layer = 0;  // attention: layer inside that cache
  };
  std::vector<LayerRef> layers_;
  std::vector<std::unique_ptr<KvCache>> caches_;
  std::vector<std::unique_ptr<RecurrentState>> recurrent_;
  KvOptions options_;
  int max_tokens_ = 0;
  int max_rows_per_forward_ = 0;
  int length_ = 0;
  int pending_ = -1;       // rows of the forward in progress (-1: none)
  bool pending_snapshots_ = false;
  int snapshot_base_ = -1;  // the snapshotted forward started at this length (-1: none valid)
  int snapshot_rows_ = 0;
};

}  // namespace nextn
