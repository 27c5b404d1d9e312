// state/recurrent_state.h — the fixed-size state of one recurrent layer for one
// sequence (Gated DeltaNet: S [Hv, dk, dv] then the conv window), and what rolling it
// back needs.
//
// The state as of the sequence's length is a plane plus a few logged rows not yet
// applied to it ("replay rows"): the layer re-applies them at the start of its next
// forward, while the plane's heads are in cache anyway. A snapshotted forward (a
// speculative verify of k rows) logs one record per row (what the layer needs to
// re-apply the row) and writes no state after its rows: the state after them is the
// plane plus its k logged rows, and returning to j rows into that forward is an index
// change (the plane plus j replay rows). The rows it re-applies first go into the plane
// in place: they were accepted, and no rollback reaches before the forward's first row.
// So a sequence holds ONE plane however it decodes (per-row planes, as in vLLM's draft
// slots or llama.cpp's rollback copies, cost k planes), a verify streams the plane once,
// read and written in place like a plain decode step, and the rows the next forward
// re-applies cost a few multiply-adds per state element, in the same pass over the
// state as its own rows. A forward that fails midway leaves the plane partly updated:
// the sequence then starts over (the engine drops a failed step's states).
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
  // The state before the forward's rows is plane() with replay_rows() logged rows
  // re-applied, oldest first (replayed_record(i)). The forward writes the state after
  // the replayed rows into plane() (in place); without snapshots it goes on in place
  // through its own rows, with snapshots it writes record(t), row t's log entry, and
  // leaves the plane at the replayed rows.
  float* plane() { return plane_.data(); }
  const float* plane() const { return plane_.data(); }
  int replay_rows() const { return replay_; }
  const float* replayed_record(int i) const;
  float* record(int t);

  // ---- between forwards -------------------------------------------------------------
  // The plane, when nothing is left to replay (replay_rows() == 0), else null: the
  // state is then only defined together with the rows the next forward replays.
  const float* settled() const { return replay_ == 0 ? plane() : nullptr; }

  // Memory: the plane, and what rollback keeps besides (the row logs).
  size_t current_bytes() const { return floats_ * sizeof(float); }
  size_t snapshot_bytes() const { return (log_.capacity() + next_log_.capacity()) * sizeof(float); }

 private:
  friend class SequenceState;
  void begin(int n, bool snapshots);
  void end();
  // Be as after j rows of the last snapshotted forward (j = 0: before it).
  void keep(int j);
  void reset();  // the state of an empty sequence (zeros)

  size_t floats_, record_floats_;
  std::vector<float> plane_;
  std::vector<float> log_, next_log_;  // records of the last snapshotted forward / the one running
  int replay_ = 0;                     // the state: plane_ + replay_ rows of log_
  int log_rows_ = -1;                  // rows of the last snapshotted forward (< 0: none, or a later forward moved on)
  // The forward in progress.
  int rows_ = 0;
  bool snapshots_ = false;
};

}  // namespace nextn
