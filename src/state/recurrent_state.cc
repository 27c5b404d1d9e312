// state/recurrent_state.cc — planes and row logs of one recurrent layer's state.
#include "state/recurrent_state.h"

#include <algorithm>

#include "util/error.h"

namespace nextn {

RecurrentState::RecurrentState(size_t floats, size_t record_floats)
    : floats_(floats), record_floats_(record_floats), plane_(floats, 0.0f) {}

void RecurrentState::begin(int n, bool snapshots) {
  rows_ = n;
  snapshots_ = snapshots;
  if (snapshots && next_log_.size() < size_t(n) * record_floats_) next_log_.resize(size_t(n) * record_floats_);
}

const float* RecurrentState::replayed_record(int i) const {
  if (i < 0 || i >= replay_) fail(ErrorKind::kInternal, "recurrent state: replay row {} of {}", i, replay_);
  return log_.data() + size_t(i) * record_floats_;
}

float* RecurrentState::record(int t) {
  if (!snapshots_ || t < 0 || t >= rows_)
    fail(ErrorKind::kInternal, "recurrent state: record {} outside the forward's {} snapshotted rows", t, rows_);
  return next_log_.data() + size_t(t) * record_floats_;
}

void RecurrentState::end() {
  if (rows_ > 0 && snapshots_) {
    log_rows_ = rows_;
    std::swap(log_, next_log_);
    replay_ = rows_;  // every row of the forward, re-applied by the next one
  } else if (rows_ > 0) {
    replay_ = 0;  // applied in place, together with the forward's rows
    log_rows_ = -1;
  }
  rows_ = 0;
  snapshots_ = false;
}

void RecurrentState::keep(int j) {
  if (log_rows_ < 0 || j < 0 || j > log_rows_)
    fail(ErrorKind::kInternal, "recurrent state: cannot keep {} rows of the last snapshotted forward ({})", j,
         std::max(0, log_rows_));
  replay_ = j;
}

void RecurrentState::reset() {
  std::fill(plane_.begin(), plane_.end(), 0.0f);
  replay_ = 0;
  log_rows_ = -1;
}

}  // namespace nextn
