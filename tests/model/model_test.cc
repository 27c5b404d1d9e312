// tests/model/model_test.cc — properties of the forward pass on random checkpoints
// from tools/make_checkpoint.py: chunking invariance, rollback by truncation,
// multi-sequence batching, mmap vs copied weights, MTP catch-up in pieces, the
// weight accounting, and config / assistant errors. (Numerical agreement with the
// float64 reference is tests/model/test_reference.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "model/mtp_head.h"
#include "util/error.h"

namespace nextn {
namespace {

namespace fs = std::filesystem;

fs::path tmp_root() { return fs::path(NEXTN_BUILD_DIR) / "test-tmp" / "model-gtest"; }

// A generated checkpoint, made once per test binary run and cached by its arguments.
std::string checkpoint(const std::string& name, const std::string& args) {
  static std::map<std::string, std::string> made;
  auto it = made.find(name);
  if (it != made.end()) return it->second;
  fs::path dir = tmp_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  std::string cmd = "/usr/bin/python3 " NEXTN_SOURCE_DIR "/tools/make_checkpoint.py --quiet " + args + " --out " +
                    dir.string();
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  made[name] = dir.string();
  return dir.string();
}

const std::vector<int32_t> kPrompt = {1, 37, 205, 12, 99, 250, 7, 64, 3, 180, 41, 5, 77};

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(b[i])));
  }
  return diff / scale;
}

// Logits of every prompt row, prefilled in chunks of `chunk`.
std::vector<float> prefill_logits(Model& model, SequenceState& kv, std::span<const int32_t> tokens, int chunk) {
  std::vector<float> all;
  ForwardResult r;
  for (size_t start = 0; start < tokens.size(); start += chunk) {
    SequenceRows rows;
    rows.state = &kv;
    rows.tokens = tokens.subspan(start, std::min<size_t>(chunk, tokens.size() - start));
    for (size_t i = 0; i < rows.tokens.size(); ++i) rows.logit_rows.push_back(int(i));
    model.forward(std::span<SequenceRows>(&rows, 1), r);
    all.insert(all.end(), r.logits.begin(), r.logits.end());
  }
  return all;
}

std::vector<float> step(Model& model, SequenceState& kv, int32_t token) {
  SequenceRows rows;
  rows.state = &kv;
  rows.tokens = std::span<const int32_t>(&token, 1);
  rows.logit_rows = {0};
  ForwardResult r;
  model.forward(std::span<SequenceRows>(&rows, 1), r);
  return r.logits;
}

class ArchTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::string dir() {
    std::string arch = GetParam();
    std::string extra = arch == "llama" ? " --rope-scaling llama3" : "";
    return checkpoint(arch, "--arch " + arch + extra);
  }
};

TEST_P(ArchTest, PrefillChunkingDoesNotChangeLogits) {
  auto model = Model::load(dir());
  auto kv1 = model->new_state(64, {});
  KvOptions f32;
  f32.type = KvType::kF32;
  auto a = model->new_state(64, f32), b = model->new_state(64, f32), c = model->new_state(64, f32);
  auto one = prefill_logits(*model, *a, kPrompt, int(kPrompt.size()));
  auto chunks = prefill_logits(*model, *b, kPrompt, 4);
  auto single = prefill_logits(*model, *c, kPrompt, 1);
  EXPECT_EQ(one.size(), kPrompt.size() * model->config().vocab_size);
  EXPECT_LT(max_rel(chunks, one), 1e-5);
  EXPECT_LT(max_rel(single, one), 1e-5);
  EXPECT_EQ(a->length(), int(kPrompt.size()));
}

TEST_P(ArchTest, TruncateAndRedecodeMatchesNeverHavingGonePast) {
  auto model = Model::load(dir());
  for (KvType type : {KvType::kF32, KvType::kF16}) {
    KvOptions o;
    o.type = type;
    auto kv = model->new_state(64, o);
    prefill_logits(*model, *kv, kPrompt, 5);
    const std::vector<int32_t> path = {9, 140, 33, 2};
    std::vector<std::vector<float>> first;
    for (int32_t t : path) first.push_back(step(*model, *kv, t));
    // Wander off: a 5-row verify-like batch, then single steps, then roll back to prompt + 2.
    const std::vector<int32_t> junk = {300, 301, 302, 303, 304};
    prefill_logits(*model, *kv, junk, 5);
    step(*model, *kv, 17);
    kv->return_to(int(kPrompt.size()) + 2);
    EXPECT_EQ(kv->length(), int(kPrompt.size()) + 2);
    for (size_t i = 2; i < path.size(); ++i) EXPECT_LT(max_rel(step(*model, *kv, path[i]), first[i]), 1e-6);
    // Roll back into the prompt and redo its tail in one batch.
    kv->return_to(3);
    auto tail = prefill_logits(*model, *kv, std::span<const int32_t>(kPrompt).subspan(3), 100);
    auto fresh_kv = model->new_state(64, o);
    auto full = prefill_logits(*model, *fresh_kv, kPrompt, 100);
    std::vector<float> full_tail(full.begin() + 3 * model->config().vocab_size, full.end());
    // Different batch shapes sum in a different order; F16 storage can round those apart.
    EXPECT_LT(max_rel(tail, full_tail), type == KvType::kF32 ? 1e-5 : 1e-4);
  }
}

TEST_P(ArchTest, SequencesBatchedTogetherMatchSeparateCalls) {
  auto model = Model::load(dir());
  const int V = model->config().vocab_size, H = model->config().hidden_size;
  KvOptions o;
  o.type = KvType::kF32;
  auto kv_a = model->new_state(64, o), kv_b = model->new_state(64, o);
  auto sep_a = model->new_state(64, o), sep_b = model->new_state(64, o);
  prefill_logits(*model, *kv_b, std::span<const int32_t>(kPrompt).subspan(0, 6), 6);
  prefill_logits(*model, *sep_b, std::span<const int32_t>(kPrompt).subspan(0, 6), 6);

  const std::vector<int32_t> ta = {5, 6, 7, 8, 9}, tb = {10, 11, 12};
  SequenceRows rows[2];
  rows[0].state = kv_a.get();
  rows[0].tokens = ta;
  rows[0].logit_rows = {4, 1};
  rows[0].hidden_rows = {2};
  rows[1].state = kv_b.get();
  rows[1].tokens = tb;
  rows[1].logit_rows = {0, 2};
  rows[1].hidden_rows = {2, 0};
  ForwardResult together;
  model->forward(std::span<SequenceRows>(rows, 2), together);
  ASSERT_EQ(together.logits.size(), size_t(4 * V));
  ASSERT_EQ(together.hidden_post.size(), size_t(3 * H));

  ForwardResult ra, rb;
  SequenceRows a = rows[0], b = rows[1];
  a.state = sep_a.get();
  b.state = sep_b.get();
  model->forward(std::span<SequenceRows>(&a, 1), ra);
  model->forward(std::span<SequenceRows>(&b, 1), rb);
  std::vector<float> logits = ra.logits, pre = ra.hidden_pre, post = ra.hidden_post;
  logits.insert(logits.end(), rb.logits.begin(), rb.logits.end());
  pre.insert(pre.end(), rb.hidden_pre.begin(), rb.hidden_pre.end());
  post.insert(post.end(), rb.hidden_post.begin(), rb.hidden_post.end());
  EXPECT_LT(max_rel(together.logits, logits), 1e-5);
  EXPECT_LT(max_rel(together.hidden_pre, pre), 1e-5);
  EXPECT_LT(max_rel(together.hidden_post, post), 1e-5);
  EXPECT_EQ(kv_a->length(), 5);
  EXPECT_EQ(kv_b->length(), 9);
}

INSTANTIATE_TEST_SUITE_P(Architectures, ArchTest, ::testing::Values("llama", "qwen2", "qwen3", "mimo"));

TEST(Model, HiddenStatesAndLogitsAreConsistent) {
  auto model = Model::load(checkpoint("qwen3", "--arch qwen3"));
  const int V = model->config().vocab_size, H = model->config().hidden_size;
  auto kv = model->new_state(64, {});
  SequenceRows rows;
  rows.state = kv.get();
  rows.tokens = kPrompt;
  rows.logit_rows = {3, 0};
  rows.hidden_rows = {0, 3};
  ForwardResult r;
  model->forward(std::span<SequenceRows>(&rows, 1), r);
  ASSERT_EQ(r.hidden_pre.size(), size_t(2 * H));
  // post = RMSNorm(pre) * w: rows of `post` have the norm's scale, and the rows come in the asked order.
  std::vector<float> l0(r.logits.begin() + V, r.logits.begin() + 2 * V);
  auto kv2 = model->new_state(64, {});
  auto first = prefill_logits(*model, *kv2, std::span<const int32_t>(kPrompt).subspan(0, 1), 1);
  EXPECT_LT(max_rel(l0, first), 1e-4);
  EXPECT_NE(r.hidden_pre[0], r.hidden_post[0]);
}

// Captured residual streams (the layer inputs EAGLE-3 and DFlash read): the last is the
// final pre-norm hidden state, each row's streams come in the asked order, and a row's
// streams do not depend on which rows were asked for.
TEST(Model, CapturedStreamsAreTheLayerInputs) {
  auto model = Model::load(checkpoint("qwen3", "--arch qwen3"));
  const int H = model->config().hidden_size, L = model->config().num_layers;
  EXPECT_THROW(model->capture_streams({L + 1}), Error);
  model->capture_streams({L, 0, 1});
  auto run = [&](std::vector<int> hidden_rows) {
    auto kv = model->new_state(64, {});
    SequenceRows rows;
    rows.state = kv.get();
    rows.tokens = kPrompt;
    rows.hidden_rows = hidden_rows;
    ForwardResult r;
    model->forward(std::span<SequenceRows>(&rows, 1), r);
    return r;
  };
  const ForwardResult both = run({0, 3}), one = run({3});
  ASSERT_EQ(both.streams.size(), size_t(2 * 3 * H));
  for (int row = 0; row < 2; ++row)
    for (int i = 0; i < H; ++i) EXPECT_EQ(both.streams[size_t(row * 3 * H + i)], both.hidden_pre[size_t(row * H + i)]);
  for (int i = 0; i < 3 * H; ++i) EXPECT_EQ(both.streams[size_t(3 * H + i)], one.streams[size_t(i)]);
  // Stream 0 (the embedding) differs from stream 1 (after layer 0) and depends on the token only.
  EXPECT_NE(both.streams[size_t(H)], both.streams[size_t(2 * H)]);
  model->capture_streams({});
  EXPECT_TRUE(run({0}).streams.empty());
}

TEST(Model, MmapAndCopiedWeightsGiveIdenticalLogits) {
  std::string dir = checkpoint("qwen2_bf16", "--arch qwen2 --dtype bf16");
  LoadOptions mmap;
  mmap.copy_weights = false;
  auto copied = Model::load(dir), mapped = Model::load(dir, mmap);
  auto a = copied->new_state(32, {}), b = mapped->new_state(32, {});
  EXPECT_EQ(prefill_logits(*copied, *a, kPrompt, 4), prefill_logits(*mapped, *b, kPrompt, 4));
  EXPECT_EQ(copied->weight_bytes(), mapped->weight_bytes());
}

TEST(Model, WeightBytesCountsEveryMatrixReadPerStep) {
  auto model = Model::load(checkpoint("qwen3", "--arch qwen3"));
  const ModelConfig& c = model->config();
  const size_t H = c.hidden_size, I = c.intermediate_size, q = size_t(c.num_heads) * c.head_dim,
               kvd = size_t(c.num_kv_heads) * c.head_dim;
  const size_t per_layer = H * q * 2 + H * kvd * 2 + 3 * H * I;
  EXPECT_EQ(model->weight_bytes(), (per_layer * c.num_layers + size_t(c.vocab_size) * H) * 4);  // F32, lm_head once
}

TEST(Model, ConfigFieldsFromTheCheckpoint) {
  auto model = Model::load(checkpoint("llama", "--arch llama --rope-scaling llama3"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.eos_token_ids.empty());
  auto mimo = Model::load(checkpoint("mimo", "--arch mimo"));
  EXPECT_TRUE(mimo->config().qkv_bias);
  EXPECT_EQ(mimo->config().mtp_layout, MtpLayout::kMiMo);
  ASSERT_NE(mimo->mtp_head(), nullptr);
  EXPECT_EQ(mimo->mtp_head()->num_layers(), mimo->config().num_mtp_layers);
  EXPECT_EQ(Model::load(checkpoint("qwen3", "--arch qwen3"))->mtp_head(), nullptr);
}

TEST(Model, ErrorsLeaveTheCacheUntouched) {
  auto model = Model::load(checkpoint("qwen3", "--arch qwen3"));
  auto kv = model->new_state(8, {});
  prefill_logits(*model, *kv, std::span<const int32_t>(kPrompt).subspan(0, 5), 5);
  std::vector<int32_t> bad = {1, model->config().vocab_size};
  SequenceRows rows;
  rows.state = kv.get();
  rows.tokens = bad;
  ForwardResult r;
  try {
    model->forward(std::span<SequenceRows>(&rows, 1), r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
  }
  EXPECT_EQ(kv->length(), 5);
  rows.tokens = kPrompt;  // 5 + 13 > 8
  try {
    model->forward(std::span<SequenceRows>(&rows, 1), r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
  }
  EXPECT_EQ(kv->length(), 5);
}

// MTP catch-up in pieces (as the engine does after each verify) equals one call.
TEST(Mtp, CatchUpInPiecesEqualsOneCall) {
  for (const char* layout : {"mimo", "deepseek"}) {
    std::string args = std::string("--arch qwen3 --mtp ") + layout;
    auto model = Model::load(checkpoint(std::string("qwen3_mtp_") + layout, args));
    MtpHead* head = model->mtp_head();
    ASSERT_NE(head, nullptr);
    const int H = model->config().hidden_size, V = model->config().vocab_size;
    auto kv = model->new_state(64, {});
    SequenceRows rows;
    rows.state = kv.get();
    rows.tokens = kPrompt;
    for (int i = 0; i < int(kPrompt.size()); ++i) rows.hidden_rows.push_back(i);
    ForwardResult r;
    model->forward(std::span<SequenceRows>(&rows, 1), r);
    const int n = int(kPrompt.size()) - 1;
    std::vector<int> all_rows(n);
    for (int i = 0; i < n; ++i) all_rows[i] = i;
    auto once_kv = head->new_state(64, {});
    std::vector<float> once_logits, once_hidden;
    head->forward(0, *once_kv, r.hidden_post.data(), std::span<const int32_t>(kPrompt).subspan(1, n), all_rows,
                  once_logits, once_hidden);
    ASSERT_EQ(once_logits.size(), size_t(n) * V);
    ASSERT_EQ(once_hidden.size(), size_t(n) * H);

    auto piece_kv = head->new_state(64, {});
    std::vector<float> logits, hidden, part_logits, part_hidden;
    for (int start = 0; start < n; start += 5) {
      int m = std::min(5, n - start);
      std::vector<int> lr(m);
      for (int i = 0; i < m; ++i) lr[i] = i;
      head->forward(0, *piece_kv, r.hidden_post.data() + size_t(start) * H,
                    std::span<const int32_t>(kPrompt).subspan(1 + start, m), lr, part_logits, part_hidden);
      logits.insert(logits.end(), part_logits.begin(), part_logits.end());
      hidden.insert(hidden.end(), part_hidden.begin(), part_hidden.end());
    }
    EXPECT_LT(max_rel(logits, once_logits), 1e-5) << layout;
    EXPECT_LT(max_rel(hidden, once_hidden), 1e-5) << layout;
    EXPECT_EQ(piece_kv->length(), n);
  }
}

// Drafting recycles the head's output as its next input: hidden may live in hidden_out.
TEST(Mtp, RecycledHiddenMayAliasTheOutput) {
  auto model = Model::load(checkpoint("mimo", "--arch mimo"));
  MtpHead* head = model->mtp_head();
  ASSERT_NE(head, nullptr);
  const int H = model->config().hidden_size;
  std::vector<float> h(H);
  for (int i = 0; i < H; ++i) h[i] = std::sin(0.3f * i);
  auto kv_a = head->new_state(16, {}), kv_b = head->new_state(16, {});
  std::vector<float> logits_a, logits_b, out_b;
  std::vector<float> recycled = h, separate = h;
  for (int32_t tok : {5, 9, 200}) {
    head->forward(0, *kv_a, recycled.data(), std::span<const int32_t>(&tok, 1), {0}, logits_a, recycled);
    head->forward(0, *kv_b, separate.data(), std::span<const int32_t>(&tok, 1), {0}, logits_b, out_b);
    separate = out_b;
    EXPECT_EQ(logits_a, logits_b);
    EXPECT_EQ(recycled, separate);
  }
  EXPECT_EQ(kv_a->length(), 3);
}

// Copies `src` into a new directory (weights by symlink) with config.json edited by `edit`.
std::string edited_copy(const std::string& src, const std::string& name,
                        const std::function<void(nlohmann::json&)>& edit) {
  fs::path dir = tmp_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(src)) {
    if (entry.path().filename() == "config.json") continue;
    fs::create_symlink(fs::absolute(entry.path()), dir / entry.path().filename());
  }
  nlohmann::json config = nlohmann::json::parse(std::ifstream(fs::path(src) / "config.json"));
  edit(config);
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir.string();
}

void expect_load_error(const std::string& dir, ErrorKind kind, const std::vector<std::string>& fragments) {
  try {
    Model::load(dir);
    FAIL() << "loaded " << dir;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "'" << f << "' not in: " << e.what();
  }
}

TEST(ConfigErrors, NameTheFileAndKey) {
  std::string src = checkpoint("qwen3", "--arch qwen3");
  expect_load_error(edited_copy(src, "no_hidden", [](auto& c) { c.erase("hidden_size"); }), ErrorKind::kBadInput,
                    {"config.json: missing key 'hidden_size'"});
  expect_load_error(edited_copy(src, "foo_arch", [](auto& c) { c["architectures"] = {"FooForCausalLM"}; }),
                    ErrorKind::kUnsupported,
                    {"config.json: unsupported architecture 'FooForCausalLM'", "Qwen3ForCausalLM", "LlamaForCausalLM"});
  expect_load_error(edited_copy(src, "str_layers", [](auto& c) { c["num_hidden_layers"] = "3"; }),
                    ErrorKind::kBadInput, {"config.json", "'num_hidden_layers'", "integer"});
  expect_load_error(edited_copy(src, "gqa", [](auto& c) { c["num_key_value_heads"] = 3; }), ErrorKind::kBadInput,
                    {"config.json", "num_key_value_heads"});
  expect_load_error(edited_copy(src, "yarn", [](auto& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}}; }),
                    ErrorKind::kUnsupported, {"config.json", "yarn"});
  expect_load_error(edited_copy(src, "act", [](auto& c) { c["hidden_act"] = "gelu"; }), ErrorKind::kUnsupported,
                    {"config.json", "gelu"});
  // A shape that disagrees with the config names the tensor and file.
  expect_load_error(edited_copy(src, "wide", [](auto& c) { c["intermediate_size"] = 96; }), ErrorKind::kBadInput,
                    {"model.safetensors", "mlp.gate_proj.weight", "expected [96, "});
  // Untied without lm_head.weight.
  expect_load_error(edited_copy(src, "untied", [](auto& c) { c["tie_word_embeddings"] = false; }),
                    ErrorKind::kBadInput, {"missing tensor 'lm_head.weight'"});
}

TEST(Assistant, LoadsAndRejectsMismatchedTargets) {
  std::string target_dir = checkpoint("qwen3", "--arch qwen3");
  std::string assistant_dir = checkpoint("qwen3_assistant", "--assistant-of " + target_dir);
  auto target = Model::load(target_dir);
  auto head = MtpHead::load_assistant(assistant_dir, *target);
  EXPECT_GE(head->num_layers(), 1);
  auto other = Model::load(checkpoint("llama", "--arch llama --rope-scaling llama3"));
  std::string wide = edited_copy(assistant_dir, "assistant_wide", [](auto& c) { c["hidden_size"] = 48; });
  try {
    MtpHead::load_assistant(wide, *target);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_size 48"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MtpHead::load_assistant(target_dir, *target), Error);  // not an assistant checkpoint
}

}  // namespace
}  // namespace nextn
