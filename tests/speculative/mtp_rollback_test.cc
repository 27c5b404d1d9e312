// tests/speculative/mtp_rollback_test.cc — an MTP draft session that went through a
// partially rejected speculative step must end in exactly the state of a session
// that only ever saw the accepted rows: same drafts, same draft logits; and one that fell
// far behind that of a session that only saw the rows it caught up.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "model/model.h"
#include "speculative/drafter.h"
#include "speculative/mtp_drafter.h"

namespace nextn {
namespace {

std::string mimo_checkpoint() {
  namespace fs = std::filesystem;
  std::string dir = std::string(NEXTN_BUILD_DIR) + "/test-tmp/spec/mimo";
  if (!fs::exists(dir + "/config.json")) {
    fs::create_directories(dir);
    std::string cmd = "/usr/bin/python3 " + std::string(NEXTN_SOURCE_DIR) +
                      "/tools/make_checkpoint.py --arch mimo --seed 1 --quiet --out " + dir;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  return dir;
}

// Runs rows through the target, returning logits of every row and hidden states.
void target_rows(Model& m, SequenceState& kv, const std::vector<int32_t>& tokens, ForwardResult& out) {
  SequenceRows rows;
  rows.state = &kv;
  rows.tokens = tokens;
  for (int i = 0; i < int(tokens.size()); ++i) {
    rows.logit_rows.push_back(i);
    rows.hidden_rows.push_back(i);
  }
  m.forward(std::span<SequenceRows>(&rows, 1), out);
}

SpeculativeOptions mtp_options() {
  SpeculativeOptions options;
  options.mode = "mtp";
  return options;
}

// One session's drafts through the drafter's batched call.
void propose(Drafter& drafter, DraftSession& session, int32_t last, int k, Sampler& sampler, DraftProposal& out) {
  DraftJob job{&session, last, k, &sampler, nullptr, &out};
  DraftPasses passes;
  drafter.propose(std::span<const DraftJob>(&job, 1), passes);
}

// The MiMo checkpoint with its MTP drafter and a greedy sampler for the drafts.
struct MtpRig {
  std::unique_ptr<Model> model = Model::load(mimo_checkpoint());
  int vocab = model->config().vocab_size, hidden = model->config().hidden_size;
  std::unique_ptr<Drafter> drafter = make_drafter(*model, mtp_options());
  Sampler sampler{SamplingParams{}, vocab, {}};
};

TEST(MtpSession, RollbackLeavesTheStateOfTheAcceptedRowsOnly) {
  MtpRig rig;
  ASSERT_TRUE(rig.drafter);
  auto& [model, vocab, hidden, drafter, sampler] = rig;

  std::vector<int32_t> prompt = {5, 9, 17, 33, 2, 71};
  int32_t last = 40;
  // Session A: prompt, one speculative step of 3 drafts of which 1 is "accepted".
  auto kv_a = model->new_state(256, KvOptions{});
  auto a = drafter->new_session(256, KvOptions{});
  ForwardResult fr;
  target_rows(*model, *kv_a, prompt, fr);
  a->commit(0, prompt, TargetRows{fr.hidden_post.data()});
  DraftProposal pa;
  propose(*drafter, *a, last, 3, sampler, pa);
  ASSERT_EQ(pa.tokens.size(), 3u);
  std::vector<int32_t> verify = {last, pa.tokens[0], pa.tokens[1], pa.tokens[2]};
  target_rows(*model, *kv_a, verify, fr);
  const int base = int(prompt.size());
  kv_a->return_to(base + 2);  // keep [last, d1]
  std::vector<int32_t> accepted = {last, pa.tokens[0]};
  a->commit(base, accepted, TargetRows{fr.hidden_post.data()});
  int32_t next = 77;  // the target's correction (any token)
  DraftProposal pa2;
  propose(*drafter, *a, next, 4, sampler, pa2);

  // Session B: the accepted sequence only, fed in one go.
  auto kv_b = model->new_state(256, KvOptions{});
  auto b = drafter->new_session(256, KvOptions{});
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), accepted.begin(), accepted.end());
  target_rows(*model, *kv_b, all, fr);
  b->commit(0, all, TargetRows{fr.hidden_post.data()});
  DraftProposal pb2;
  propose(*drafter, *b, next, 4, sampler, pb2);
  EXPECT_EQ(pa2.tokens, pb2.tokens);

  // And with sampled drafts the q distributions agree too.
  SamplingParams hot;
  hot.temperature = 1.0f;
  hot.seed = 3;
  hot.has_seed = true;
  Sampler sa(hot, vocab, {}), sb(hot, vocab, {});
  // Roll both back to the same point and redraft.
  a->rollback(int(all.size()));
  b->rollback(int(all.size()));
  propose(*drafter, *a, next, 2, sa, pa2);
  propose(*drafter, *b, next, 2, sb, pb2);
  ASSERT_EQ(pa2.q.size(), 2u);
  EXPECT_EQ(pa2.tokens, pb2.tokens);
  // The accepted rows' hidden states come from a 4-row pass in A and an 8-row pass in
  // B; a matmul may group its float32 sums differently with the row count (the SCALAR
  // target does), so the states agree to float32 rounding (~1e-7 relative), amplified
  // through the layers of the target and the head to ~1e-5 in log-probability. 1e-4 is
  // the bound the engine's logits meet against the float64 reference.
  for (int t = 0; t < vocab; ++t) {
    if (pa2.q[0].p(t) == 0.0f && pb2.q[0].p(t) == 0.0f) continue;  // cut by the sampler
    const double la = std::log(double(pa2.q[0].p(t))), lb = std::log(double(pb2.q[0].p(t)));
    EXPECT_NEAR(la, lb, 1e-4) << "token " << t;
  }
  (void)hidden;
}

// After a stretch of plain decoding (no propose: the adaptive depth chose k = 0) longer
// than kMtpMaxCatchUp rows, the head runs only the last kMtpMaxCatchUp of them: its state
// is that of a session that saw the same rows before the stretch and then only those, and
// stays so through a speculative step.
TEST(MtpSession, FarBehindCatchesUpOnlyTheLastRows) {
  MtpRig rig;
  ASSERT_TRUE(rig.drafter);
  auto& [model, vocab, hidden, drafter, sampler] = rig;

  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(int32_t((i * 37 + 11) % vocab));
  auto kv = model->new_state(256, KvOptions{});
  ForwardResult fr;
  target_rows(*model, *kv, tokens, fr);
  const std::vector<float> all_hidden = fr.hidden_post;

  // Session A: a 6-row prompt, one proposal, then 34 rows committed one at a time.
  auto a = drafter->new_session(256, KvOptions{});
  a->commit(0, std::span<const int32_t>(tokens.data(), 6), TargetRows{all_hidden.data()});
  DraftProposal pa;
  propose(*drafter, *a, tokens[6], 2, sampler, pa);
  for (int p = 6; p < 40; ++p)
    a->commit(p, std::span<const int32_t>(tokens.data() + p, 1), TargetRows{all_hidden.data() + size_t(p) * size_t(hidden)});
  // Session B: the same prompt and proposal, then only the last kMtpMaxCatchUp rows.
  const int first = 40 - kMtpMaxCatchUp;
  auto b = drafter->new_session(256, KvOptions{});
  b->commit(0, std::span<const int32_t>(tokens.data(), 6), TargetRows{all_hidden.data()});
  DraftProposal pb;
  propose(*drafter, *b, tokens[6], 2, sampler, pb);
  b->commit(6, std::span<const int32_t>(tokens.data() + first, size_t(kMtpMaxCatchUp)),
            TargetRows{all_hidden.data() + size_t(first) * size_t(hidden)});
  int32_t next = 77;
  DraftProposal pa2, pb2;
  propose(*drafter, *a, next, 4, sampler, pa2);
  propose(*drafter, *b, next, 4, sampler, pb2);
  ASSERT_EQ(pa2.tokens.size(), 4u);
  EXPECT_EQ(pa2.tokens, pb2.tokens);
  EXPECT_EQ(a->kv_bytes(), b->kv_bytes());

  // A speculative step keeping one draft, then the next proposal: still alike.
  std::vector<int32_t> accepted = {next, pa2.tokens[0]};
  std::vector<int32_t> step_tokens = {next, pa2.tokens[0], pa2.tokens[1]};
  target_rows(*model, *kv, step_tokens, fr);
  a->commit(40, accepted, TargetRows{fr.hidden_post.data()});
  b->commit(6 + kMtpMaxCatchUp, accepted, TargetRows{fr.hidden_post.data()});
  propose(*drafter, *a, 91, 3, sampler, pa2);
  propose(*drafter, *b, 91, 3, sampler, pb2);
  EXPECT_EQ(pa2.tokens, pb2.tokens);
  EXPECT_EQ(a->kv_bytes(), b->kv_bytes());

  // A rollback below the skipped rows restarts the head; drafting goes on.
  a->rollback(10);
  a->commit(10, std::span<const int32_t>(tokens.data() + 10, 3), TargetRows{all_hidden.data() + size_t(10) * size_t(hidden)});
  propose(*drafter, *a, tokens[13], 2, sampler, pa2);
  EXPECT_EQ(pa2.tokens.size(), 2u);
}

// A drafting step that accepts more rows than kMtpMaxCatchUp keeps all of them: the head
// then equals one that was fed the same rows as a prompt.
TEST(MtpSession, LongAcceptedStepIsCaughtUpWhole) {
  MtpRig rig;
  ASSERT_TRUE(rig.drafter);
  auto& [model, vocab, hidden, drafter, sampler] = rig;
  const int step = kMtpMaxCatchUp + 5;  // the step's kept rows: its accepted drafts + 1
  std::vector<int32_t> tokens;
  for (int i = 0; i < 6 + step; ++i) tokens.push_back(int32_t((i * 53 + 7) % vocab));
  auto kv = model->new_state(256, KvOptions{});
  ForwardResult fr;
  target_rows(*model, *kv, tokens, fr);

  auto a = drafter->new_session(256, KvOptions{});
  a->commit(0, std::span<const int32_t>(tokens.data(), 6), TargetRows{fr.hidden_post.data()});
  DraftProposal pa;
  propose(*drafter, *a, tokens[6], step - 1, sampler, pa);
  a->commit(6, std::span<const int32_t>(tokens.data() + 6, size_t(step)), TargetRows{fr.hidden_post.data() + 6 * size_t(hidden)});
  auto b = drafter->new_session(256, KvOptions{});
  b->commit(0, tokens, TargetRows{fr.hidden_post.data()});
  DraftProposal pa2, pb2;
  propose(*drafter, *a, 77, 3, sampler, pa2);
  propose(*drafter, *b, 77, 3, sampler, pb2);
  EXPECT_EQ(pa2.tokens, pb2.tokens);
  EXPECT_EQ(a->kv_bytes(), b->kv_bytes());
}

}  // namespace
}  // namespace nextn
