// state/recurrent_state.cc — planes of one recurrent layer's state.
#include "state/recurrent_state.h"

#include <algorithm>

#include "util/error.h"

namespace nextn {

RecurrentState::RecurrentState(size_t floats) : floats_(floats) { planes_.emplace_back(floats, 0.0f); }

void RecurrentState::begin(int n, bool snapshots) {
  rows_ = n;
  snapshots_ = snapshots;
  if (!snapshots) return;
  // n rows need n planes besides the current one; planes are added at the end, so the
  // current index stays valid.
  while (int(planes_.size()) < n + 1) planes_.emplace_back(floats_, 0.0f);
  base_ = current_;
}

const float* RecurrentState::row_input(int t) const {
  if (!snapshots_ || t == 0) return planes_[size_t(current_)].data();
  return planes_[size_t(after_row_plane(t - 1))].data();
}

float* RecurrentState::row_output(int t) {
  if (t < 0 || t >= rows_) fail(ErrorKind::kInternal, "recurrent state: row {} outside the forward's {} rows", t, rows_);
  return snapshots_ ? plane(after_row_plane(t)) : plane(current_);
}

void RecurrentState::end() {
  if (snapshots_ && rows_ > 0) current_ = after_row_plane(rows_ - 1);
  rows_ = 0;
  snapshots_ = false;
}

void RecurrentState::select(int j) { current_ = j == 0 ? base_ : after_row_plane(j - 1); }

void RecurrentState::reset() { std::fill(planes_[size_t(current_)].begin(), planes_[size_t(current_)].end(), 0.0f); }

}  // namespace nextn
