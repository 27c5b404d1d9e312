// tests/speculative/dflash_session_test.cc — a DFlash draft session that followed the
// target through prompt chunks, partially rejected verify steps (only the accepted rows
// committed, the state returned) and a rollback must hold exactly the context of a
// session that saw the surviving rows in one commit: the same block drafts and the same
// draft distributions at T > 0, greedy likewise.
#include <gtest/gtest.h>

#include "model/model.h"
#include "speculative/drafter.h"
#include "spec_test_util.h"

namespace nextn {
namespace {

using spec_test::checkpoint;

// Runs `tokens` through the target at its end; every row's streams come back.
void run(Model& m, SequenceState& state, const std::vector<int32_t>& tokens, ForwardResult& out) {
  SequenceRows rows;
  rows.state = &state;
  rows.tokens = tokens;
  for (int i = 0; i < int(tokens.size()); ++i) rows.hidden_rows.push_back(i);
  m.forward(std::span<SequenceRows>(&rows, 1), out);
}

TEST(DFlashSession, FollowsCommitsAndRollbacks) {
  const std::string target_dir = checkpoint("qwen3", "--arch qwen3 --seed 2");
  SpeculativeOptions o;
  o.mode = "dflash";
  o.num_draft_tokens = 5;
  o.draft_model_dir =
      checkpoint("qwen3_dflash_b6", "--dflash-of " + target_dir + " --dflash-layers 2 --block-size 6 --seed 8");
  std::unique_ptr<Model> model = Model::load(target_dir);
  std::unique_ptr<Drafter> drafter = make_drafter(*model, o);
  ASSERT_TRUE(drafter);
  ASSERT_STREQ(drafter->name(), "dflash");
  model->capture_streams(drafter->reads().streams);
  const int vocab = model->config().vocab_size;
  std::vector<int32_t> text;
  for (int i = 0; i < 40; ++i) text.push_back(int32_t((i * 37 + 11) % vocab));
  const int H = model->config().hidden_size, S = int(drafter->reads().streams.size());

  // The followed session: a 7-row prompt in chunks of 4 and 3, then verify steps of
  // [text[L], d1, d2, d3] accepting a = 0..3 (wrong drafts after them), then a rollback.
  auto followed_state = model->new_state(128, KvOptions{});
  auto followed = drafter->new_session(128, KvOptions{});
  ForwardResult fr;
  int L = 0;
  for (int n : {4, 3}) {
    std::vector<int32_t> chunk(text.begin() + L, text.begin() + L + n);
    run(*model, *followed_state, chunk, fr);
    followed->commit(L, chunk, TargetRows{nullptr, fr.streams.data()});
    L += n;
  }
  for (int a : {2, 0, 3, 1, 0, 2}) {
    std::vector<int32_t> rows(text.begin() + L, text.begin() + L + 1 + a);
    while (rows.size() < 4) rows.push_back(int32_t((rows.back() + 101) % vocab));  // rejected drafts
    run(*model, *followed_state, rows, fr);
    followed_state->return_to(L + 1 + a);
    std::vector<int32_t> kept(rows.begin(), rows.begin() + 1 + a);
    followed->commit(L, kept, TargetRows{nullptr, fr.streams.data()});
    L += 1 + a;
    ASSERT_EQ(fr.streams.size(), size_t(4) * S * H);
  }
  L -= 3;  // the prefix cache returns to an earlier length
  followed_state->return_to(L);
  followed->rollback(L);

  // The reference: the surviving rows in one commit.
  auto fresh_state = model->new_state(128, KvOptions{});
  auto fresh = drafter->new_session(128, KvOptions{});
  std::vector<int32_t> prefix(text.begin(), text.begin() + L);
  run(*model, *fresh_state, prefix, fr);
  fresh->commit(0, prefix, TargetRows{nullptr, fr.streams.data()});

  for (float temperature : {0.0f, 0.8f}) {
    SamplingParams sp;
    sp.temperature = temperature;
    sp.seed = 5;
    sp.has_seed = true;
    Sampler s1(sp, vocab, prefix), s2(sp, vocab, prefix);
    DraftProposal p1, p2;
    DraftJob j1{followed.get(), text[size_t(L)], 5, &s1, followed_state.get(), &p1};
    DraftJob j2{fresh.get(), text[size_t(L)], 5, &s2, fresh_state.get(), &p2};
    DraftPasses passes;
    drafter->propose(std::span<const DraftJob>(&j1, 1), passes);
    drafter->propose(std::span<const DraftJob>(&j2, 1), passes);
    // One block forward each: five depths, the four deeper ones at no cost.
    EXPECT_EQ(passes.sequences, std::vector<int>(10, 1));
    EXPECT_GT(passes.seconds[0], 0.0);
    EXPECT_EQ(passes.seconds[1] + passes.seconds[4], 0.0);
    ASSERT_EQ(p1.tokens.size(), 5u) << "T " << temperature;
    EXPECT_EQ(p1.tokens, p2.tokens) << "T " << temperature;
    ASSERT_EQ(p1.q.size(), p2.q.size());
    for (size_t i = 0; i < p1.q.size(); ++i)
      for (int32_t t : p2.q[i].support) EXPECT_NEAR(p1.q[i].p(t), p2.q[i].p(t), 1e-5) << "slot " << i + 1;
  }

  // A job asking for more than the block holds gets block_size - 1 drafts.
  SamplingParams greedy;
  Sampler s(greedy, vocab, prefix);
  DraftProposal p;
  DraftJob deep{fresh.get(), text[size_t(L)], 9, &s, fresh_state.get(), &p};
  DraftPasses passes;
  drafter->propose(std::span<const DraftJob>(&deep, 1), passes);
  EXPECT_EQ(p.tokens.size(), 5u);
}

}  // namespace
}  // namespace nextn
