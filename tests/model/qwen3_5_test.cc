// tests/model/qwen3_5_test.cc — properties of the hybrid (Qwen3.5) forward pass that the
// float64 comparison (test_qwen3_5_reference.py) does not cover: the chunked prefill
// form equals the token-by-token recurrence for any split (chunk boundaries inside and
// across 64-row blocks), and rollback of a speculative verify returns every layer to
// exactly (bit for bit) the state of a run fed only the accepted tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "model/model.h"
#include "model_test_util.h"
#include "model/mtp_head.h"
#include "util/error.h"

namespace nextn {
namespace {

using model_test::logits_in_pieces;
using model_test::max_rel;
using model_test::one_step;
using model_test::verify_forward;
using model_test::prompt_of;


std::string hybrid_checkpoint() { return model_test::random_checkpoint("qwen3_5", 5); }

TEST(Qwen3_5, ChunkedPrefillEqualsTokenByToken) {
  auto model = Model::load(hybrid_checkpoint());
  const auto tokens = prompt_of(150);  // three 64-row blocks (64, 64, 22) in one forward
  auto st = model->new_state(256, {});
  const auto ref = logits_in_pieces(*model, *st, tokens, 1);
  for (int chunk : {150, 64, 65, 50, 37, 2}) {
    auto s = model->new_state(256, {});
    EXPECT_LE(max_rel(logits_in_pieces(*model, *s, tokens, chunk), ref), 1e-4) << "chunk " << chunk;
  }
}

// The recurrent state (S and conv window) of every DeltaNet layer, as raw bytes; only
// defined when no logged rows wait to be re-applied (after a forward that is not a
// verify, or a rollback that kept none of its rows).
std::vector<std::vector<float>> recurrent_states(const Model& m, SequenceState& st) {
  std::vector<std::vector<float>> out;
  for (int l = 0; l < m.config().num_layers; ++l) {
    if (m.config().layers[size_t(l)].mixer != MixerKind::kGatedDeltaNet) continue;
    const RecurrentState& r = st.recurrent(l);
    EXPECT_NE(r.settled(), nullptr) << "layer " << l << " has rows to replay";
    if (r.settled()) out.emplace_back(r.settled(), r.settled() + r.floats());
  }
  return out;
}

void expect_same_states(const Model& m, SequenceState& a, SequenceState& b, const std::string& what) {
  ASSERT_EQ(a.length(), b.length()) << what;
  const auto sa = recurrent_states(m, a), sb = recurrent_states(m, b);
  ASSERT_EQ(sa.size(), 3u) << what;
  ASSERT_EQ(sb.size(), 3u) << what;
  for (size_t l = 0; l < sa.size(); ++l)
    EXPECT_EQ(std::memcmp(sa[l].data(), sb[l].data(), sa[l].size() * sizeof(float)), 0)
        << what << ", DeltaNet layer " << l;
}

// A rollback keeps the start plane and the accepted rows' log (state/recurrent_state.h);
// the next forward re-applies them. Whatever that next forward is (a decode row, or
// another verify, which also logs and checkpoints), every layer ends bit for bit where a
// run fed only the accepted tokens does.
TEST(Qwen3_5, RollbackEqualsARunFedOnlyTheAcceptedTokens) {
  auto model = Model::load(hybrid_checkpoint());
  const auto prompt = prompt_of(20);
  const std::vector<int32_t> verify = {5, 77, 140, 9, 300};  // [last, d1..d4]
  const std::vector<int32_t> second = {11, 23, 31};           // the next verify
  for (int kept = 0; kept <= int(verify.size()); ++kept) {
    const std::string what = "kept " + std::to_string(kept);
    // A: prompt, one verify forward of every row, back to `kept` rows.
    auto a = model->new_state(64, {});
    logits_in_pieces(*model, *a, prompt, 20);
    verify_forward(*model, *a, verify);
    ASSERT_TRUE(a->can_return_to(20 + kept));
    a->return_to(20 + kept);
    // B: the same prompt, then only the kept rows, one at a time.
    auto b = model->new_state(64, {});
    logits_in_pieces(*model, *b, prompt, 20);
    for (int i = 0; i < kept; ++i) one_step(*model, *b, verify[size_t(i)]);
    if (kept == 0) expect_same_states(*model, *a, *b, what + ", right after");
    // A decode row next: same logits (attention KV and recurrent state alike), same state.
    auto a2 = model->new_state(64, {});
    logits_in_pieces(*model, *a2, prompt, 20);
    verify_forward(*model, *a2, verify);
    a2->return_to(20 + kept);
    const auto la = one_step(*model, *a2, 42), lb = one_step(*model, *b, 42);
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0) << what;
    expect_same_states(*model, *a2, *b, what + ", then a decode row");
    // Another verify next (it replays the kept rows and checkpoints them), keeping 1 of
    // its 3 rows, then a decode row.
    const auto va = verify_forward(*model, *a, second);
    auto c = model->new_state(64, {});
    logits_in_pieces(*model, *c, prompt, 20);
    for (int i = 0; i < kept; ++i) one_step(*model, *c, verify[size_t(i)]);
    const auto vc = verify_forward(*model, *c, second);
    EXPECT_EQ(std::memcmp(va.data(), vc.data(), va.size() * sizeof(float)), 0) << what << ", second verify";
    a->return_to(20 + kept + 1);
    one_step(*model, *a, 42);
    auto d = model->new_state(64, {});
    logits_in_pieces(*model, *d, prompt, 20);
    for (int i = 0; i < kept; ++i) one_step(*model, *d, verify[size_t(i)]);
    one_step(*model, *d, second[0]);
    one_step(*model, *d, 42);
    expect_same_states(*model, *a, *d, what + ", then a verify kept 1 of 3 and a decode row");
  }
}

TEST(Qwen3_5, ReturnableLengths) {
  auto model = Model::load(hybrid_checkpoint());
  auto st = model->new_state(64, {});
  logits_in_pieces(*model, *st, prompt_of(10), 10);
  EXPECT_TRUE(st->can_return_to(10));
  EXPECT_TRUE(st->can_return_to(0));
  EXPECT_FALSE(st->can_return_to(5));  // inside a plain prefill: the recurrence cannot go back
  EXPECT_EQ(st->longest_returnable(7), 0);
  EXPECT_THROW(st->return_to(5), Error);
  EXPECT_GT(st->recurrent_bytes(), 0u);
  EXPECT_EQ(st->snapshot_bytes(), 0u);
}

TEST(Qwen3_5, MtpHeadCatchUpInPiecesEqualsOnce) {
  auto model = Model::load(hybrid_checkpoint());
  MtpHead* head = model->mtp_head();
  ASSERT_NE(head, nullptr);
  const auto tokens = prompt_of(12);
  auto st = model->new_state(64, {});
  ForwardResult r;
  SequenceRows rows;
  rows.state = st.get();
  rows.tokens = tokens;
  for (int i = 0; i < 12; ++i) rows.hidden_rows.push_back(i);
  model->forward(std::span<SequenceRows>(&rows, 1), r);
  std::vector<float> once, hid, piece_a, piece_b;
  auto s1 = head->new_state(64, {});
  std::vector<int> all(11);
  for (int i = 0; i < 11; ++i) all[size_t(i)] = i;
  head->forward(0, *s1, r.hidden_post.data(), std::span<const int32_t>(tokens).subspan(1, 11), all, once, hid);
  auto s2 = head->new_state(64, {});
  std::vector<int> first(5), second(6);
  for (int i = 0; i < 5; ++i) first[size_t(i)] = i;
  for (int i = 0; i < 6; ++i) second[size_t(i)] = i;
  head->forward(0, *s2, r.hidden_post.data(), std::span<const int32_t>(tokens).subspan(1, 5), first, piece_a, hid);
  head->forward(0, *s2, r.hidden_post.data() + 5 * model->config().hidden_size,
                std::span<const int32_t>(tokens).subspan(6, 6), second, piece_b, hid);
  piece_a.insert(piece_a.end(), piece_b.begin(), piece_b.end());
  EXPECT_LE(max_rel(piece_a, once), 1e-5);
}

}  // namespace
}  // namespace nextn
