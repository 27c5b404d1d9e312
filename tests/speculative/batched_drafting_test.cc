// tests/speculative/batched_drafting_test.cc — drafting for several sequences in one
// batched call (one drafter forward per depth over every sequence still drafting) gives
// each sequence the drafts, and the distributions they were drawn from, that drafting
// for it alone gives: sequences of different lengths and depths 1..4 in one call, for
// every drafter (MTP heads with one and two layers, an MTP assistant checkpoint, a
// draft model, the Gemma 4 assistant over the target's KV, EAGLE-3 over the target's layer
// inputs, n-gram, suffix), greedy and sampled; DFlash drafts every sequence's block in its
// one forward.
#include <gtest/gtest.h>

#include "model/model.h"
#include "speculative/drafter.h"
#include "spec_test_util.h"

namespace nextn {
namespace {

using spec_test::checkpoint;

// Four sequences of different lengths, each with its target state, committed to two
// sessions (one drafts in the batch, one alone) and two identically seeded samplers.
struct Sequences {
  static constexpr int kCount = 4;
  std::vector<std::unique_ptr<SequenceState>> target;
  std::vector<std::unique_ptr<DraftSession>> together, alone;
  std::vector<std::unique_ptr<Sampler>> sampler_together, sampler_alone;
  std::vector<int32_t> last;

  Sequences(Model& model, Drafter& drafter, float temperature) {
    const int vocab = model.config().vocab_size;
    const int lengths[kCount] = {5, 11, 3, 24};
    SamplingParams sp;
    sp.temperature = temperature;
    sp.seed = 9;
    sp.has_seed = true;
    for (int s = 0; s < kCount; ++s) {
      std::vector<int32_t> tokens;
      for (int i = 0; i < lengths[s]; ++i) tokens.push_back(int32_t((i * 31 + 17 * s + 3) % vocab));
      // Repeat the prompt's start so n-gram lookups find something.
      tokens.insert(tokens.end(), tokens.begin(), tokens.begin() + std::min<long>(3, long(tokens.size())));
      target.push_back(model.new_state(256, KvOptions{}));
      SequenceRows rows;
      rows.state = target.back().get();
      rows.tokens = tokens;
      for (int i = 0; i < int(tokens.size()); ++i) rows.hidden_rows.push_back(i);
      ForwardResult fr;
      model.capture_streams(drafter.reads().streams);
      model.forward(std::span<SequenceRows>(&rows, 1), fr);
      const TargetRows rows_out{fr.hidden_post.data(), fr.streams.empty() ? nullptr : fr.streams.data()};
      for (auto* list : {&together, &alone}) {
        list->push_back(drafter.new_session(256, KvOptions{}));
        list->back()->commit(0, tokens, rows_out);
      }
      sampler_together.push_back(std::make_unique<Sampler>(sp, vocab, tokens));
      sampler_alone.push_back(std::make_unique<Sampler>(sp, vocab, tokens));
      last.push_back(tokens[1]);
    }
  }
};

void expect_batched_equals_alone(const std::string& model_dir, SpeculativeOptions options) {
  std::unique_ptr<Model> model = Model::load(model_dir);
  std::unique_ptr<Drafter> drafter = make_drafter(*model, options);
  ASSERT_TRUE(drafter);
  model->capture_streams(drafter->reads().streams);  // as the Speculator does
  const int depths[Sequences::kCount] = {3, 1, 4, 2};
  for (float temperature : {0.0f, 0.8f}) {
    const std::string what = options.mode + " at T " + std::to_string(temperature);
    Sequences seqs(*model, *drafter, temperature);
    std::vector<DraftProposal> batched(Sequences::kCount), single(Sequences::kCount);
    std::vector<DraftJob> jobs;
    for (int s = 0; s < Sequences::kCount; ++s)
      jobs.push_back(DraftJob{seqs.together[size_t(s)].get(), seqs.last[size_t(s)], depths[s],
                              seqs.sampler_together[size_t(s)].get(), seqs.target[size_t(s)].get(), &batched[size_t(s)]});
    DraftPasses passes;
    drafter->propose(jobs, passes);
    int drafted = 0;
    for (int s = 0; s < Sequences::kCount; ++s) {
      DraftJob job{seqs.alone[size_t(s)].get(), seqs.last[size_t(s)], depths[s], seqs.sampler_alone[size_t(s)].get(),
                   seqs.target[size_t(s)].get(), &single[size_t(s)]};
      DraftPasses one;
      drafter->propose(std::span<const DraftJob>(&job, 1), one);
      const DraftProposal &b = batched[size_t(s)], &a = single[size_t(s)];
      EXPECT_EQ(b.tokens, a.tokens) << what << " sequence " << s;
      EXPECT_LE(int(b.tokens.size()), depths[s]) << what;
      drafted += int(b.tokens.size());
      ASSERT_EQ(b.q.size(), a.q.size()) << what;
      for (size_t i = 0; i < b.q.size(); ++i)
        for (int32_t t : a.q[i].support) EXPECT_NEAR(b.q[i].p(t), a.q[i].p(t), 1e-5) << what;
    }
    EXPECT_GT(drafted, 0) << what;
    // A model drafter runs one pass per depth over the sequences that draft that deep.
    // DFlash makes every depth in its one forward (a block of 4 drafts at most 3): the
    // deeper passes are reported at no cost.
    if (options.mode == "dflash") {
      EXPECT_EQ(passes.sequences, (std::vector<int>{4, 3, 2})) << what;
      EXPECT_EQ(passes.seconds[1] + passes.seconds[2], 0.0) << what;
    } else if (options.mode != "ngram" && options.mode != "suffix") {
      EXPECT_EQ(passes.sequences, (std::vector<int>{4, 3, 2, 1})) << what;
    }
  }
}

SpeculativeOptions options(const std::string& mode) {
  SpeculativeOptions o;
  o.mode = mode;
  o.num_draft_tokens = 4;
  return o;
}

TEST(BatchedDrafting, MtpHead) {
  expect_batched_equals_alone(checkpoint("mimo", "--arch mimo --seed 1"), options("mtp"));
}

TEST(BatchedDrafting, MtpHeadTwoLayers) {
  expect_batched_equals_alone(checkpoint("mimo2", "--arch mimo --mtp-layers 2 --seed 3"), options("mtp"));
}

TEST(BatchedDrafting, MtpHeadReducedDraftVocabulary) {
  SpeculativeOptions o = options("mtp");
  o.draft_vocab = 200;
  expect_batched_equals_alone(checkpoint("mimo", "--arch mimo --seed 1"), o);
}

TEST(BatchedDrafting, MtpAssistantCheckpoint) {
  const std::string target = checkpoint("qwen3", "--arch qwen3 --seed 2");
  SpeculativeOptions o = options("assistant");
  o.assistant_dir = checkpoint("qwen3_assistant", "--assistant-of " + target);
  expect_batched_equals_alone(target, o);
}

TEST(BatchedDrafting, DraftModel) {
  SpeculativeOptions o = options("draft");
  o.draft_model_dir = checkpoint("qwen3_small", "--arch qwen3 --layers 1 --seed 7");
  expect_batched_equals_alone(checkpoint("qwen3", "--arch qwen3 --seed 2"), o);
}

TEST(BatchedDrafting, DFlash) {
  const std::string target = checkpoint("qwen3", "--arch qwen3 --seed 2");
  SpeculativeOptions o = options("dflash");
  o.draft_model_dir = checkpoint("qwen3_dflash", "--dflash-of " + target + " --dflash-layers 2 --block-size 4 --seed 8");
  expect_batched_equals_alone(target, o);
}

TEST(BatchedDrafting, Gemma4AssistantOverTheTargetsKv) {
  const std::string target = checkpoint("gemma4", "--arch gemma4 --seed 5");
  SpeculativeOptions o = options("assistant");
  o.assistant_dir = checkpoint("gemma4_assistant", "--assistant-of " + target + " --seed 6");
  expect_batched_equals_alone(target, o);
}

TEST(BatchedDrafting, Eagle3ReadingTargetLayerInputs) {
  const std::string target = checkpoint("qwen3", "--arch qwen3 --seed 2");
  SpeculativeOptions o = options("eagle3");
  o.draft_model_dir = checkpoint("qwen3_eagle3", "--eagle3-of " + target + " --draft-vocab 300 --seed 8");
  expect_batched_equals_alone(target, o);
}

TEST(BatchedDrafting, Ngram) {
  expect_batched_equals_alone(checkpoint("mimo", "--arch mimo --seed 1"), options("ngram"));
}

TEST(BatchedDrafting, Suffix) {
  expect_batched_equals_alone(checkpoint("mimo", "--arch mimo --seed 1"), options("suffix"));
}

}  // namespace
}  // namespace nextn
