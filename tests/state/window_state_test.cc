// tests/state/window_state_test.cc — a SequenceState with sliding-window layers:
// layers of one shape share a ring, a KV-sharing layer points at its donor's slot, the
// rows of one forward are bounded by the ring's slack, and the lengths it can return to
// follow the ring.
#include "state/sequence_state.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "util/error.h"
#include "../kv/kv_test_util.h"

namespace nextn {
namespace {

// A model state with a sliding layer (window 8), a full layer and a layer reading the
// sliding layer's KV.
TEST(WindowState, ReturnableLengthsFollowTheRing) {
  LayerStateSpec sliding{LayerStateSpec::Kind::kAttention, 4, 2, 16, 8, -1, 0};
  LayerStateSpec full{LayerStateSpec::Kind::kAttention, 4, 2, 32, 0, -1, 0};
  LayerStateSpec reader{LayerStateSpec::Kind::kReadsKv, 4, 2, 16, 8, 0, 0};
  SequenceState state({sliding, full, reader}, 1000, KvOptions{});
  EXPECT_EQ(state.max_rows_per_forward(), kMinWindowSlackRows);
  AttentionSlot own = state.attention(0), read = state.attention(2);
  EXPECT_TRUE(own.owns);
  EXPECT_FALSE(read.owns);
  EXPECT_EQ(own.cache, read.cache);
  EXPECT_EQ(own.layer, read.layer);
  EXPECT_NE(state.attention(1).cache, own.cache);  // another shape, another cache
  EXPECT_TRUE(state.has_attention(0) && state.has_attention(1) && state.has_attention(2));
  EXPECT_FALSE(state.has_attention(3));  // past the last layer
  auto k = testing_kv::random_floats(size_t(32) * 64, 10);
  for (int step = 0; step < 8; ++step) {
    state.begin_rows(32, false);
    AttentionSlot a = state.attention(0), f = state.attention(1);
    a.cache->append(a.layer, state.length(), 32, k.data(), k.data());
    f.cache->append(f.layer, state.length(), 32, k.data(), k.data());
    state.end_rows();
  }
  EXPECT_EQ(state.length(), 256);
  EXPECT_TRUE(state.can_return_to(256 - 32));
  EXPECT_TRUE(state.can_return_to(0));
  EXPECT_FALSE(state.can_return_to(50));
  EXPECT_EQ(state.longest_returnable(50), 0);
  EXPECT_EQ(state.longest_returnable(250), 250);
  EXPECT_THROW(state.begin_rows(33, false), Error);
  state.return_to(240);
  EXPECT_EQ(state.length(), 240);
}

// A recurrent layer has no attention slot: has_attention says so instead of throwing.
TEST(WindowState, HasAttentionSkipsRecurrentLayers) {
  LayerStateSpec attention{LayerStateSpec::Kind::kAttention, 4, 2, 16, 0, -1, 0};
  LayerStateSpec recurrent;
  recurrent.kind = LayerStateSpec::Kind::kRecurrent;
  recurrent.recurrent_floats = 64;
  recurrent.recurrent_record_floats = 16;
  SequenceState state({recurrent, attention}, 100, KvOptions{});
  EXPECT_FALSE(state.has_attention(0));
  EXPECT_THROW(state.attention(0), Error);
  EXPECT_TRUE(state.has_attention(1));
  EXPECT_TRUE(state.attention(1).owns);
}

}  // namespace
}  // namespace nextn
