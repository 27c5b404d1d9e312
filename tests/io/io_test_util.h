// tests/io/io_test_util.h — writing small safetensors files and checkpoint
// directories from tests (independent of the code under test).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace nextn::testing_io {

struct TensorBytes {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

// Element i of float32 data that a safetensors file placed at any byte offset (a direct
// float read from an unaligned address is undefined behaviour).
inline float f32_at(const void* data, size_t i) {
  float f;
  std::memcpy(&f, static_cast<const char*>(data) + i * sizeof(float), sizeof f);
  return f;
}

inline TensorBytes f32_tensor(const std::string& name, std::vector<int64_t> shape, float start = 0.0f) {
  TensorBytes t{name, "F32", shape, {}};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  t.bytes.resize(n * 4);
  for (int64_t i = 0; i < n; ++i) {
    float v = start + static_cast<float>(i);
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
  return t;
}

// A well-formed file from tensors laid out back to back.
inline std::string safetensors_bytes(const std::vector<TensorBytes>& tensors, nlohmann::json* header_out = nullptr) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const TensorBytes& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  }
  header["__metadata__"] = {{"format", "pt"}};
  if (header_out) *header_out = header;
  return data;
}

// Header JSON text + data region -> file contents.
inline std::string assemble(const std::string& header_text, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_text + data;
}

inline void write_file(const std::filesystem::path& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

inline void write_safetensors(const std::filesystem::path& path, const std::vector<TensorBytes>& tensors) {
  nlohmann::json header;
  std::string data = safetensors_bytes(tensors, &header);
  write_file(path, assemble(header.dump(), data));
}

// A fresh empty directory under the build tree.
inline std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(NEXTN_BUILD_DIR) / "test-tmp" / "io" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace nextn::testing_io
