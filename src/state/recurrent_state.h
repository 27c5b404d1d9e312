// state/recurrent_state.h — the fixed-size state of one recurrent layer for one
// sequence (Gated DeltaNet: S [Hv, dk, dv] then the conv window), and what rolling it
// back needs.
//
// The state as of the sequence's length is a plane plus a few logged rows not yet
// applied to it ("replay rows"): the layer re-applies them at the start of its next
// forward, while the plane's heads are in cache anyway. A snapshotted forward (a
// speculative verify of k rows) logs one record per row (what the layer needs to
// re-apply the row) and writes no plane after its rows: the state after them is its
// base plane plus its k logged rows, and returning to j rows into that forward is an
// index change (the base plus j replay rows). Its base is the plane it started from or,
// when it re-applied rows first, a checkpoint plane written after them. So a verify
// writes at most one plane whatever k is (per-row planes, as in vLLM's draft slots or
// llama.cpp's rollback copies, write k), and nothing for its own rows, so a sequence
// holds two planes (megabytes each on a hybrid model), not three; the rows the next
// forward re-applies cost a few multiply-adds per state element, in the same pass over
// the state as its own rows.
#pragma once
#include <cstddef>
#include <vector>

namespace nextn {

class RecurrentState {
 public:
  // floats: one plane; record_floats: one logged row.
  RecurrentState(size_t floats, size_t record_floats);

  size_t floats() const { return floats_; }
  size_t record_floats() const { return record_floats_; }

  // ---- during a forward (between SequenceState::begin_rows and end_rows) ----------
  // The state before the forward's rows is start() with replay_rows() logged rows
  // re-applied, oldest first (replayed_record(i)).
  const float* start() const { return plane(start_); }
  int replay_rows() const { return replay_; }
  const float* replayed_record(int i) const;
  // Where the forward writes. out(): the state after its last row, start() itself
  // (update in place); null with snapshots, which write checkpoint(), the state after
  // the replayed rows (only when replay_rows() > 0), and record(t), row t's log entry.
  float* out();
  float* checkpoint();
  float* record(int t);

  // ---- between forwards -------------------------------------------------------------
  // The plane, when nothing is left to replay (replay_rows() == 0), else null: the
  // state is then only defined together with the rows the next forward replays.
  const float* settled() const { return replay_ == 0 ? plane(start_) : nullptr; }

  // Memory: one plane, and what rollback keeps besides (the other planes and the logs).
  size_t current_bytes() const { return floats_ * sizeof(float); }
  size_t snapshot_bytes() const;

 private:
  friend class SequenceState;
  void begin(int n, bool snapshots);
  void end();
  // Be as after j rows of the last snapshotted forward (j = 0: before it).
  void keep(int j);
  void reset();  // the state of an empty sequence (zeros)

  const float* plane(int i) const { return planes_[size_t(i)].data(); }
  float* plane(int i) { return planes_[size_t(i)].data(); }

  size_t floats_, record_floats_;
  std::vector<std::vector<float>> planes_;  // 1, then 2 once a forward keeps snapshots
  std::vector<float> log_, next_log_;       // records of the last snapshotted forward / the one running
  int start_ = 0, replay_ = 0;              // the state: plane start_ + replay_ rows of log_
  // The last snapshotted forward: its rows start from plane base_ and are its log_rows_
  // records (base_ < 0: none, or a later forward changed the planes).
  int base_ = -1, log_rows_ = 0;
  // The forward in progress.
  int rows_ = 0;
  bool snapshots_ = false;
  int checkpoint_ = -1;
};

}  // namespace nextn
