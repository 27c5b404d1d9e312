// tests/model/gemma4_test.cc — properties of the Gemma 4 forward pass that the float64
// comparison (test_gemma4_reference.py) does not cover: any prefill split equals token by
// token; rolling back a speculative verify after the sliding-window ring has wrapped leaves
// every cache (rings, full layers, the layers reading donors) exactly as a run fed only the
// accepted tokens, bit for bit over 40 further steps; and the lengths a state can return to
// follow the ring.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "model/model.h"
#include "model_test_util.h"
#include "util/error.h"

namespace nextn {
namespace {

using model_test::logits_in_pieces;
using model_test::max_rel;
using model_test::one_step;
using model_test::verify_forward;
using model_test::prompt_of;


std::string gemma4_checkpoint() { return model_test::random_checkpoint("gemma4", 11); }


TEST(Gemma4, AnyPrefillSplitEqualsTokenByToken) {
  auto model = Model::load(gemma4_checkpoint());
  const auto tokens = prompt_of(150);  // window 8, ring 8 + 32: wraps several times
  auto st = model->new_state(256, {});
  const auto ref = logits_in_pieces(*model, *st, tokens, 1);
  for (int chunk : {150, 64, 33, 32, 31, 9, 8, 7, 2}) {
    auto s = model->new_state(256, {});
    EXPECT_LE(max_rel(logits_in_pieces(*model, *s, tokens, chunk), ref), 1e-5) << "chunk " << chunk;
  }
}

TEST(Gemma4, RollbackAfterTheRingWrapsEqualsARunFedOnlyTheAcceptedTokens) {
  auto model = Model::load(gemma4_checkpoint());
  const auto prompt = prompt_of(150);
  const std::vector<int32_t> verify = {5, 77, 140, 9, 300, 21, 64};  // [last, d1..d6]
  for (int kept = 0; kept <= int(verify.size()); ++kept) {
    // A: prompt, one verify forward of every row, back to `kept` rows.
    auto a = model->new_state(256, {});
    logits_in_pieces(*model, *a, prompt, 50);
    verify_forward(*model, *a, verify);
    ASSERT_TRUE(a->can_return_to(150 + kept));
    a->return_to(150 + kept);
    // B: the same prompt, then only the kept rows, one at a time.
    auto b = model->new_state(256, {});
    logits_in_pieces(*model, *b, prompt, 50);
    for (int i = 0; i < kept; ++i) one_step(*model, *b, verify[size_t(i)]);
    ASSERT_EQ(a->length(), b->length());
    // 40 more rows (five windows): every cache must agree.
    for (int t = 0; t < 40; ++t) {
      const int32_t token = int32_t((t * 29 + 3) % 380);
      const auto la = one_step(*model, *a, token), lb = one_step(*model, *b, token);
      ASSERT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0) << "kept " << kept << " step " << t;
    }
  }
}

TEST(Gemma4, ReturnableLengthsFollowTheRing) {
  auto model = Model::load(gemma4_checkpoint());
  auto st = model->new_state(256, {});
  logits_in_pieces(*model, *st, prompt_of(150), 150);
  EXPECT_EQ(st->max_rows_per_forward(), 32);
  EXPECT_TRUE(st->can_return_to(150));
  EXPECT_TRUE(st->can_return_to(150 - 32));  // the last forward piece
  EXPECT_TRUE(st->can_return_to(0));
  EXPECT_FALSE(st->can_return_to(10));       // the ring no longer holds the window before 10
  EXPECT_EQ(st->longest_returnable(10), 0);
  EXPECT_THROW(st->return_to(10), Error);
  // KV is stored by the 3 sliding layers that own it (rings of 8 + 32 positions) and the
  // one full layer that owns it (all 150 positions); the 3 sharing layers store nothing.
  // F16, K and V, 2 kv heads of 16 / 32 dims.
  const size_t ring = 3 * 40 * 2 * 2 * 16 * 2, full = 1 * 150 * 2 * 2 * 32 * 2;
  EXPECT_EQ(st->attention_bytes(), ring + full);
}

}  // namespace
}  // namespace nextn
