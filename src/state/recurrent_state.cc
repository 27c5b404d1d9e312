// state/recurrent_state.cc — planes and row logs of one recurrent layer's state.
#include "state/recurrent_state.h"

#include <algorithm>

#include "util/error.h"

namespace nextn {

RecurrentState::RecurrentState(size_t floats, size_t record_floats) : floats_(floats), record_floats_(record_floats) {
  planes_.emplace_back(floats, 0.0f);
}

void RecurrentState::begin(int n, bool snapshots) {
  rows_ = n;
  snapshots_ = snapshots;
  checkpoint_ = -1;
  if (!snapshots) return;  // update in place
  if (planes_.size() < 2) planes_.emplace_back(floats_, 0.0f);
  // start_ stays as it is (returning to the forward's first row lands there when
  // nothing was replayed); the replayed rows end in the other plane.
  if (replay_ > 0) checkpoint_ = 1 - start_;
  if (next_log_.size() < size_t(n) * record_floats_) next_log_.resize(size_t(n) * record_floats_);
}

const float* RecurrentState::replayed_record(int i) const {
  if (i < 0 || i >= replay_) fail(ErrorKind::kInternal, "recurrent state: replay row {} of {}", i, replay_);
  return log_.data() + size_t(i) * record_floats_;
}

float* RecurrentState::out() { return snapshots_ ? nullptr : plane(start_); }

float* RecurrentState::checkpoint() {
  if (checkpoint_ < 0) fail(ErrorKind::kInternal, "recurrent state: no checkpoint in this forward");
  return plane(checkpoint_);
}

float* RecurrentState::record(int t) {
  if (!snapshots_ || t < 0 || t >= rows_)
    fail(ErrorKind::kInternal, "recurrent state: record {} outside the forward's {} snapshotted rows", t, rows_);
  return next_log_.data() + size_t(t) * record_floats_;
}

void RecurrentState::end() {
  if (rows_ > 0 && snapshots_) {
    base_ = replay_ > 0 ? checkpoint_ : start_;
    log_rows_ = rows_;
    std::swap(log_, next_log_);
    start_ = base_;
    replay_ = rows_;  // every row of the forward, re-applied by the next one
  } else if (rows_ > 0) {
    replay_ = 0;  // applied in place, together with the forward's rows
    base_ = -1;
    log_rows_ = 0;
  }
  rows_ = 0;
  snapshots_ = false;
}

void RecurrentState::keep(int j) {
  if (base_ < 0 || j < 0 || j > log_rows_)
    fail(ErrorKind::kInternal, "recurrent state: cannot keep {} rows of the last snapshotted forward ({})", j,
         base_ < 0 ? 0 : log_rows_);
  start_ = base_;
  replay_ = j;
}

void RecurrentState::reset() {
  std::fill(planes_[size_t(start_)].begin(), planes_[size_t(start_)].end(), 0.0f);
  replay_ = 0;
  base_ = -1;
  log_rows_ = 0;
}

size_t RecurrentState::snapshot_bytes() const {
  return ((planes_.size() - 1) * floats_ + log_.capacity() + next_log_.capacity()) * sizeof(float);
}

}  // namespace nextn
