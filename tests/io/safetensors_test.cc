// tests/io/safetensors_test.cc — the safetensors reader accepts well-formed files and
// rejects every kind of damage with an nextn::Error naming the file (and tensor).
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include "io_test_util.h"
#include "util/error.h"

namespace nextn {
namespace {

using namespace testing_io;

// Expects open() to throw an Error of `kind` whose message contains every fragment.
void expect_error(const std::filesystem::path& path, ErrorKind kind, std::vector<std::string> fragments) {
  try {
    SafetensorsFile::open(path.string());
    FAIL() << "no error for " << path;
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << "message does not name the file: " << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

TEST(Safetensors, ReadsTensorsWithShapesDtypesAndData) {
  auto dir = fresh_dir("read");
  TensorBytes bf{"b", "BF16", {3}, {0x80, 0x3f, 0x00, 0x40, 0x40, 0x40}};  // 1, 2, 3
  TensorBytes f16{"h", "F16", {1, 2}, {0x00, 0x3c, 0x00, 0xc0}};           // 1, -2
  write_safetensors(dir / "m.safetensors", {f32_tensor("a.weight", {2, 3}, 1.0f), bf, f16});
  auto file = SafetensorsFile::open((dir / "m.safetensors").string());
  ASSERT_EQ(file->tensors().size(), 3u);
  std::map<std::string, const TensorView*> by_name;
  for (const auto& t : file->tensors()) by_name[t.name] = &t;
  const TensorView& a = *by_name.at("a.weight");
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.numel(), 6);
  EXPECT_EQ(a.nbytes, 24u);
  EXPECT_EQ(a.shape_string(), "[2, 3]");
  EXPECT_EQ(a.file, (dir / "m.safetensors").string());
  EXPECT_EQ(f32_at(a.data, 5), 6.0f);
  const TensorView& b = *by_name.at("b");
  EXPECT_EQ(b.dtype, DType::kBF16);
  EXPECT_EQ(bf16_to_f32(static_cast<const uint16_t*>(b.data)[2]), 3.0f);
  const TensorView& h = *by_name.at("h");
  EXPECT_EQ(h.dtype, DType::kF16);
  EXPECT_EQ(f16_to_f32(static_cast<const uint16_t*>(h.data)[1]), -2.0f);
}

TEST(Safetensors, ScalarsAndEmptyTensors) {
  auto dir = fresh_dir("scalar");
  write_safetensors(dir / "m.safetensors", {f32_tensor("s", {}), TensorBytes{"e", "F32", {0, 4}, {}}});
  auto file = SafetensorsFile::open((dir / "m.safetensors").string());
  ASSERT_EQ(file->tensors().size(), 2u);
}

TEST(Safetensors, NonFloatDtypesAreListedSeparately) {
  auto dir = fresh_dir("int");
  TensorBytes ids{"ids", "I64", {2}, std::vector<unsigned char>(16, 0)};
  write_safetensors(dir / "m.safetensors", {ids, f32_tensor("w", {2})});
  auto file = SafetensorsFile::open((dir / "m.safetensors").string());
  EXPECT_EQ(file->tensors().size(), 1u);
  EXPECT_EQ(file->other_tensors().at("ids").dtype, "I64");
}

TEST(Safetensors, MissingFile) {
  auto dir = fresh_dir("missing");
  expect_error(dir / "nope.safetensors", ErrorKind::kNotFound, {"not found"});
}

TEST(Safetensors, TooShortForHeaderLength) {
  auto dir = fresh_dir("short");
  write_file(dir / "m.safetensors", "abc");
  expect_error(dir / "m.safetensors", ErrorKind::kBadInput, {"truncated"});
}

TEST(Safetensors, HeaderLengthPastEndOfFile) {
  auto dir = fresh_dir("hdrlen");
  std::string bytes = assemble("{}", "");
  bytes[0] = 100;  // claims a 100-byte header
  write_file(dir / "m.safetensors", bytes);
  expect_error(dir / "m.safetensors", ErrorKind::kBadInput, {"truncated"});
}

TEST(Safetensors, AbsurdHeaderLength) {
  auto dir = fresh_dir("hdrhuge");
  std::string bytes = assemble("{}", "");
  bytes[7] = 0x7f;
  write_file(dir / "m.safetensors", bytes);
  expect_error(dir / "m.safetensors", ErrorKind::kBadInput, {"header length"});
}

TEST(Safetensors, MalformedJson) {
  auto dir = fresh_dir("badjson");
  write_file(dir / "m.safetensors", assemble("{\"a\": {\"dtype\": \"F32\",", ""));
  expect_error(dir / "m.safetensors", ErrorKind::kBadInput, {"JSON"});
}

TEST(Safetensors, HeaderNotAnObject) {
  auto dir = fresh_dir("array");
  write_file(dir / "m.safetensors", assemble("[1, 2]", ""));
  expect_error(dir / "m.safetensors", ErrorKind::kBadInput, {"not a JSON object"});
}

TEST(Safetensors, EntryFieldsValidated) {
  auto dir = fresh_dir("fields");
  const std::string data(8, '\0');
  struct Case {
    const char* header;
    const char* fragment;
  } cases[] = {
      {R"({"t": 5})", "not an object"},
      {R"({"t": {"shape": [2], "data_offsets": [0, 8]}})", "'dtype'"},
      {R"({"t": {"dtype": "F32", "data_offsets": [0, 8]}})", "'shape'"},
      {R"({"t": {"dtype": "F32", "shape": [2]}})", "data_offsets"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", "data_offsets"},
      {R"({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", "shape"},
      {R"({"t": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", "shape"},
      {R"({"t": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}})", "unknown dtype 'Q7'"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", "reversed"},
      {R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", "needs 12 bytes"},
      {R"({"t": {"dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})", "needs 4 bytes"},
      {R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", "past the end"},
      {R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", "past the end"},
      {R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})", "needs"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", "overlap"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    write_file(dir / "m.safetensors", assemble(c.header, data));
    expect_error(dir / "m.safetensors", ErrorKind::kBadInput, {c.fragment});
  }
}

TEST(Safetensors, TruncatedDataRegion) {
  auto dir = fresh_dir("truncdata");
  nlohmann::json header;
  std::string data = safetensors_bytes({f32_tensor("a", {4}), f32_tensor("b.weight", {8})}, &header);
  std::string bytes = assemble(header.dump(), data);
  write_file(dir / "m.safetensors", bytes.substr(0, bytes.size() - 5));
  expect_error(dir / "m.safetensors", ErrorKind::kBadInput, {"b.weight", "past the end"});
}

}  // namespace
}  // namespace nextn
