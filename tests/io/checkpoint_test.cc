// tests/io/checkpoint_test.cc — checkpoint directory resolution: config files,
// single-file and sharded safetensors, tensor lookup and the errors of each.
#include "io/checkpoint.h"

#include <gtest/gtest.h>

#include "io_test_util.h"
#include "util/error.h"

namespace nextn {
namespace {

using namespace testing_io;
namespace fs = std::filesystem;

// Runs fn, expecting an Error of `kind` mentioning every fragment.
template <typename Fn>
void expect_error(Fn fn, ErrorKind kind, std::vector<std::string> fragments) {
  try {
    fn();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    for (const auto& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "'" << f << "' not in: " << e.what();
  }
}

fs::path dir_with_config(const std::string& name, const std::string& config = R"({"model_type": "x"})") {
  fs::path dir = fresh_dir(name);
  write_file(dir / "config.json", config);
  return dir;
}

TEST(Checkpoint, SingleFile) {
  fs::path dir = dir_with_config("single");
  write_file(dir / "generation_config.json", R"({"eos_token_id": [1, 2]})");
  write_safetensors(dir / "model.safetensors", {f32_tensor("b", {2, 2}), f32_tensor("a", {3})});
  auto ckpt = Checkpoint::open(dir.string());
  EXPECT_EQ(ckpt->config()["model_type"], "x");
  EXPECT_EQ(ckpt->generation_config()["eos_token_id"][1], 2);
  EXPECT_EQ(ckpt->tensor_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(ckpt->has("a"));
  EXPECT_FALSE(ckpt->has("c"));
  EXPECT_EQ(ckpt->find("c"), nullptr);
  const TensorView& b = ckpt->require("b", {2, 2});
  EXPECT_EQ(f32_at(b.data, 3), 3.0f);
}

TEST(Checkpoint, GenerationConfigIsOptional) {
  fs::path dir = dir_with_config("nogen");
  write_safetensors(dir / "model.safetensors", {f32_tensor("a", {3})});
  auto ckpt = Checkpoint::open(dir.string());
  EXPECT_TRUE(ckpt->generation_config().is_object());
  EXPECT_TRUE(ckpt->generation_config().empty());
}

TEST(Checkpoint, Sharded) {
  fs::path dir = dir_with_config("sharded");
  write_safetensors(dir / "model-00001-of-00002.safetensors", {f32_tensor("a", {3}), f32_tensor("b", {1})});
  write_safetensors(dir / "model-00002-of-00002.safetensors", {f32_tensor("c", {2}, 7.0f)});
  write_file(dir / "model.safetensors.index.json", R"({"metadata": {}, "weight_map": {
      "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"}})");
  auto ckpt = Checkpoint::open(dir.string());
  EXPECT_EQ(ckpt->tensor_names(), (std::vector<std::string>{"a", "b", "c"}));
  const TensorView& c = ckpt->require("c", {2});
  EXPECT_EQ(f32_at(c.data, 1), 8.0f);
  EXPECT_NE(c.file.find("model-00002-of-00002.safetensors"), std::string::npos);
}

TEST(Checkpoint, RequireChecksPresenceShapeAndDtype) {
  fs::path dir = dir_with_config("require");
  write_safetensors(dir / "model.safetensors",
                    {f32_tensor("w", {2, 3}), TensorBytes{"ids", "I32", {2}, std::vector<unsigned char>(8, 0)}});
  auto ckpt = Checkpoint::open(dir.string());
  expect_error([&] { ckpt->require("w", {3, 2}); }, ErrorKind::kBadInput,
               {"model.safetensors", "'w'", "[2, 3]", "expected [3, 2]"});
  expect_error([&] { ckpt->require("missing.weight", {1}); }, ErrorKind::kBadInput,
               {"model.safetensors", "missing tensor 'missing.weight'"});
  expect_error([&] { ckpt->require("ids", {2}); }, ErrorKind::kBadInput, {"model.safetensors", "'ids'", "I32"});
}

TEST(Checkpoint, Errors) {
  expect_error([] { Checkpoint::open((fresh_dir("gone") / "nothing").string()); }, ErrorKind::kNotFound,
               {"nothing", "not found"});
  {
    fs::path dir = fresh_dir("noconfig");
    write_safetensors(dir / "model.safetensors", {f32_tensor("a", {3})});
    expect_error([&] { Checkpoint::open(dir.string()); }, ErrorKind::kNotFound, {"config.json"});
  }
  {
    fs::path dir = dir_with_config("badconfig", "{\"a\": ");
    write_safetensors(dir / "model.safetensors", {f32_tensor("a", {3})});
    expect_error([&] { Checkpoint::open(dir.string()); }, ErrorKind::kBadInput, {"config.json", "malformed JSON"});
  }
  {
    fs::path dir = dir_with_config("configarray", "[1]");
    write_safetensors(dir / "model.safetensors", {f32_tensor("a", {3})});
    expect_error([&] { Checkpoint::open(dir.string()); }, ErrorKind::kBadInput, {"config.json"});
  }
  {
    fs::path dir = dir_with_config("badgen");
    write_file(dir / "generation_config.json", "{,}");
    write_safetensors(dir / "model.safetensors", {f32_tensor("a", {3})});
    expect_error([&] { Checkpoint::open(dir.string()); }, ErrorKind::kBadInput, {"generation_config.json"});
  }
  {
    fs::path dir = dir_with_config("noweights");
    expect_error([&] { Checkpoint::open(dir.string()); }, ErrorKind::kNotFound, {"model.safetensors"});
  }
  {
    fs::path dir = dir_with_config("corrupt");
    write_file(dir / "model.safetensors", assemble("{\"a\": 1}", ""));
    expect_error([&] { Checkpoint::open(dir.string()); }, ErrorKind::kBadInput, {"model.safetensors", "'a'"});
  }
}

TEST(Checkpoint, ShardErrors) {
  auto sharded = [](const std::string& name, const std::string& index) {
    fs::path dir = dir_with_config(name);
    write_safetensors(dir / "s1.safetensors", {f32_tensor("a", {3})});
    write_safetensors(dir / "s2.safetensors", {f32_tensor("b", {3}), f32_tensor("a", {1})});
    write_file(dir / "model.safetensors.index.json", index);
    return dir.string();
  };
  expect_error([&] { Checkpoint::open(sharded("idx_bad", "{")); }, ErrorKind::kBadInput,
               {"model.safetensors.index.json", "malformed"});
  expect_error([&] { Checkpoint::open(sharded("idx_nomap", "{}")); }, ErrorKind::kBadInput,
               {"model.safetensors.index.json", "weight_map"});
  expect_error([&] { Checkpoint::open(sharded("idx_missing_file", R"({"weight_map": {"a": "s3.safetensors"}})")); },
               ErrorKind::kNotFound, {"s3.safetensors"});
  expect_error([&] { Checkpoint::open(sharded("idx_escape", R"({"weight_map": {"a": "../s1.safetensors"}})")); },
               ErrorKind::kBadInput, {"invalid file"});
  expect_error([&] { Checkpoint::open(sharded("idx_absent", R"({"weight_map": {"c": "s1.safetensors"}})")); },
               ErrorKind::kBadInput, {"s1.safetensors", "'c'", "missing"});
  expect_error(
      [&] {
        Checkpoint::open(sharded("idx_dup", R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})"));
      },
      ErrorKind::kBadInput, {"'a'", "s1.safetensors", "s2.safetensors"});
}

}  // namespace
}  // namespace nextn
