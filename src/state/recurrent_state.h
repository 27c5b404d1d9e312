// state/recurrent_state.h — the fixed-size state of one recurrent layer for one
// sequence (Gated DeltaNet: S [Hv, dk, dv] then the conv window), in planes.
// A plain forward updates the current plane in place. A snapshotted forward of n
// rows writes row t's state into its own plane, reading row t-1's, so afterwards the
// state after every row exists and choosing one is an index change (as vLLM's
// per-draft state slots and llama.cpp's rollback planes).
#pragma once
#include <cstddef>
#include <vector>

namespace nextn {

class RecurrentState {
 public:
  explicit RecurrentState(size_t floats);

  size_t floats() const { return floats_; }
  // The state as of the sequence's current length (between forwards).
  const float* current() const { return planes_[size_t(current_)].data(); }

  // During a forward of n rows (between begin and end): the state row t reads
  // (t == 0: the state before the rows) and the one it writes. Without snapshots both
  // are the current plane (update in place).
  const float* row_input(int t) const;
  float* row_output(int t);

  // Memory: the current plane, and the others kept for rollback.
  size_t current_bytes() const { return floats_ * sizeof(float); }
  size_t snapshot_bytes() const { return (planes_.size() - 1) * floats_ * sizeof(float); }

 private:
  friend class SequenceState;
  void begin(int n, bool snapshots);
  void end();
  // The plane holding the state after j rows of the last snapshotted forward (j = 0: before it).
  void select(int j);
  void reset();  // the state of an empty sequence (zeros)

  float* plane(int i) { return planes_[size_t(i)].data(); }
  int after_row_plane(int t) const { return (base_ + 1 + t) % int(planes_.size()); }

  size_t floats_;
  std::vector<std::vector<float>> planes_;
  int current_ = 0;
  int base_ = 0;  // the plane current at the start of the last snapshotted forward
  int rows_ = 0;  // rows of the forward in progress
  bool snapshots_ = false;
};

}  // namespace nextn
