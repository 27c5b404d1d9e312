// io/gguf.cc — parsing and validation of the GGUF container (the GGUF v3 specification:
// docs/gguf.md in the ggml repository).
#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "io/json_file.h"
#include "util/error.h"

namespace nextn {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kMaxNameBytes = 1 << 16;
constexpr int kMaxArrayDepth = 4;

// GGUF metadata value types.
enum ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Bytes of one fixed-size value; 0 for strings, arrays and unknown types.
size_t fixed_size(uint32_t type) {
  switch (type) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
  }
}

// A bounds-checked little-endian reader over the mapped bytes. `what` names the key or
// tensor being read so that a truncation message can say where it happened.
class Cursor {
 public:
  Cursor(const std::string& path, const unsigned char* data, size_t size) : path_(path), data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  void need(uint64_t n, const std::string& what) const {
    if (n > remaining())
      fail(ErrorKind::kBadInput, "{}: truncated GGUF file: {} needs {} bytes at offset {} but only {} remain", path_, what,
           n, pos_, remaining());
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const std::string& path_;
  const unsigned char* data_;
  size_t size_;
  size_t pos_ = 0;
};

nlohmann::json read_value(Cursor& c, uint32_t type, const std::string& key, const std::string& path, int depth) {
  switch (type) {
    case kU8: return c.read<uint8_t>(key);
    case kI8: return c.read<int8_t>(key);
    case kU16: return c.read<uint16_t>(key);
    case kI16: return c.read<int16_t>(key);
    case kU32: return c.read<uint32_t>(key);
    case kI32: return c.read<int32_t>(key);
    case kF32: return c.read<float>(key);
    case kU64: return c.read<uint64_t>(key);
    case kI64: return c.read<int64_t>(key);
    case kF64: return c.read<double>(key);
    case kBool: {
      const uint8_t b = c.read<uint8_t>(key);
      if (b > 1) fail(ErrorKind::kBadInput, "{}: metadata key '{}': boolean value {} is not 0 or 1", path, key, b);
      return b == 1;
    }
    case kString: return c.string(key);
    case kArray: {
      if (depth >= kMaxArrayDepth)
        fail(ErrorKind::kBadInput, "{}: metadata key '{}': arrays nested deeper than {}", path, key, kMaxArrayDepth);
      const uint32_t elem = c.read<uint32_t>(key);
      const uint64_t count = c.read<uint64_t>(key);
      // Every element takes at least one byte (strings and arrays at least 8), so a
      // count beyond the remaining bytes is damage, caught before allocating.
      const uint64_t min_elem = fixed_size(elem) ? fixed_size(elem) : 8;
      if (elem > kF64) fail(ErrorKind::kBadInput, "{}: metadata key '{}': unknown array element type {}", path, key, elem);
      if (count > c.remaining() / min_elem)
        fail(ErrorKind::kBadInput, "{}: metadata key '{}': array of {} elements does not fit in the file", path, key,
             count);
      nlohmann::json arr = nlohmann::json::array();
      arr.get_ref<nlohmann::json::array_t&>().reserve(count);
      for (uint64_t i = 0; i < count; ++i) arr.push_back(read_value(c, elem, key, path, depth + 1));
      return arr;
    }
    default: fail(ErrorKind::kBadInput, "{}: metadata key '{}': unknown value type {}", path, key, type);
  }
}

}  // namespace

std::string gguf_model_file(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::path(model_path).extension() == ".gguf") return model_path;
  if (!fs::is_directory(model_path, ec) || fs::exists(fs::path(model_path) / "config.json", ec)) return "";
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(model_path, ec))
    if (entry.path().extension() == ".gguf") found.push_back(entry.path().string());
  std::sort(found.begin(), found.end());
  return found.empty() ? "" : found.front();
}

std::pair<const char*, uint64_t> integer_type(uint32_t type) {
  switch (type) {
    case 24: return {"I8", 1};
    case 25: return {"I16", 2};
    case 26: return {"I32", 4};
    case 27: return {"I64", 8};
    default: return {nullptr, 0};
  }
}

std::string ggml_type_name(uint32_t type) {
  static const char* const names[] = {
      "F32", "F16", "Q4_0", "Q4_1", "Q4_2 (removed)", "Q4_3 (removed)", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
      "BF16", "Q4_0_4_4 (removed)", "Q4_0_4_8 (removed)", "Q4_0_8_8 (removed)", "TQ1_0", "TQ2_0",
      "IQ4_NL_4_4 (removed)", "IQ4_NL_4_8 (removed)", "IQ4_NL_8_8 (removed)", "MXFP4", "NVFP4", "Q1_0"};
  if (type < sizeof(names) / sizeof(names[0])) return names[type];
  return "type " + std::to_string(type);
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> file(new GgufFile(path));
  file->parse();
  return file;
}

void GgufFile::parse() {
  const std::string& path = file_.path();
  Cursor c(path, file_.data(), file_.size());
  if (file_.size() < 24) fail(ErrorKind::kBadInput, "{}: truncated GGUF file ({} bytes, header needs 24)", path, file_.size());
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) fail(ErrorKind::kBadInput, "{}: not a GGUF file (bad magic)", path);
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    fail(ErrorKind::kUnsupported, "{}: GGUF version {} is not supported (supported: 2, 3)", path, version_);
  const uint64_t n_tensors = c.read<uint64_t>("tensor_count");
  const uint64_t n_kv = c.read<uint64_t>("metadata_kv_count");
  // A KV pair takes at least 8 + 4 bytes + a value, a tensor info at least 8 + 4 + 4 + 8.
  if (n_kv > c.remaining() / 13 || n_tensors > c.remaining() / 24)
    fail(ErrorKind::kBadInput, "{}: corrupt GGUF header: {} metadata keys and {} tensors cannot fit in {} bytes", path,
         n_kv, n_tensors, file_.size());

  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string what = "metadata key #" + std::to_string(i);
    const std::string key = c.string(what);
    if (key.empty() || key.size() > kMaxNameBytes) fail(ErrorKind::kBadInput, "{}: {} has an invalid name", path, what);
    if (metadata_.contains(key)) fail(ErrorKind::kBadInput, "{}: metadata key '{}' appears twice", path, key);
    const uint32_t type = c.read<uint32_t>(key);
    metadata_[key] = read_value(c, type, key, path, 0);
  }
  if (metadata_.contains("general.alignment")) {
    const nlohmann::json& a = metadata_["general.alignment"];
    if (!a.is_number_unsigned() || a.get<uint64_t>() == 0 || a.get<uint64_t>() % 8 != 0 || a.get<uint64_t>() > (1u << 20))
      fail(ErrorKind::kBadInput, "{}: metadata key 'general.alignment' must be a multiple of 8, got {}", path, json_text(a));
    alignment_ = a.get<uint64_t>();
  }

  struct Info {
    std::string name;
    std::vector<int64_t> shape;  // PyTorch order
    DType dtype;
    uint64_t offset, bytes;
    const char* integer = nullptr;  // an integer tensor's dtype name (raw_tensors), else null
  };
  std::vector<Info> infos;
  infos.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Info info;
    info.name = c.string("tensor info #" + std::to_string(i));
    const std::string& name = info.name;
    if (name.empty() || name.size() > kMaxNameBytes)
      fail(ErrorKind::kBadInput, "{}: tensor info #{} has an invalid name", path, i);
    const uint32_t n_dims = c.read<uint32_t>(name);
    if (n_dims == 0 || n_dims > 4)
      fail(ErrorKind::kBadInput, "{}: tensor '{}': {} dimensions (GGUF allows 1 to 4)", path, name, n_dims);
    std::vector<uint64_t> ne(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ne[d] = c.read<uint64_t>(name);
      if (ne[d] == 0)
        fail(ErrorKind::kBadInput, "{}: tensor '{}': dimension {} is 0 (a tensor without elements)", path, name, d);
      if (ne[d] > (uint64_t{1} << 40) || (ne[d] != 0 && numel > (uint64_t{1} << 48) / ne[d]))
        fail(ErrorKind::kBadInput, "{}: tensor '{}': dimension {} of {} is implausibly large", path, name, d, ne[d]);
      numel *= ne[d];
    }
    const uint32_t type = c.read<uint32_t>(name);
    info.offset = c.read<uint64_t>(name);
    if (const auto [integer, size] = integer_type(type); integer) {
      // Integer tensors hold indices, not weights (EAGLE-3's d2t): kept raw.
      info.integer = integer;
      info.bytes = numel * size;
      if (info.offset % alignment_ != 0)
        fail(ErrorKind::kBadInput, "{}: tensor '{}': data offset {} is not a multiple of the alignment {}", path, name,
             info.offset, alignment_);
      for (uint32_t d = 0; d < n_dims; ++d) info.shape.push_back(static_cast<int64_t>(ne[n_dims - 1 - d]));
      infos.push_back(std::move(info));
      continue;
    }
    if (!dtype_from_ggml_type(type, info.dtype))
      fail(ErrorKind::kUnsupported, "{}: tensor '{}' has type {}, which nextn does not support (supported: F32, F16, "
           "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", path, name, ggml_type_name(type));
    const DTypeInfo& t = dtype_info(info.dtype);
    if (ne[0] % static_cast<uint64_t>(t.block_elems) != 0)
      fail(ErrorKind::kBadInput, "{}: tensor '{}': innermost dimension {} is not a multiple of the {} block of {}", path,
           name, ne[0], t.name, t.block_elems);
    info.bytes = numel / static_cast<uint64_t>(t.block_elems) * static_cast<uint64_t>(t.block_bytes);
    if (info.offset % alignment_ != 0)
      fail(ErrorKind::kBadInput, "{}: tensor '{}': data offset {} is not a multiple of the alignment {}", path, name,
           info.offset, alignment_);
    for (uint32_t d = 0; d < n_dims; ++d) info.shape.push_back(static_cast<int64_t>(ne[n_dims - 1 - d]));
    infos.push_back(std::move(info));
  }
  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_start > file_.size() && !infos.empty())
    fail(ErrorKind::kBadInput, "{}: truncated GGUF file: tensor data would start at {} past the end ({} bytes)", path,
         data_start, file_.size());
  const uint64_t data_size = file_.size() > data_start ? file_.size() - data_start : 0;

  std::vector<const Info*> order;
  for (const Info& info : infos) {
    if (info.offset > data_size || info.bytes > data_size - info.offset)
      fail(ErrorKind::kBadInput, "{}: tensor '{}': data [{}, {}) lies past the end of the file (data region is {} bytes)",
           path, info.name, info.offset, info.offset + info.bytes, data_size);
    order.push_back(&info);
  }
  std::sort(order.begin(), order.end(), [](const Info* a, const Info* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i - 1]->bytes > 0 && order[i]->offset < order[i - 1]->offset + order[i - 1]->bytes)
      fail(ErrorKind::kBadInput, "{}: tensors '{}' and '{}' overlap in the data region", path, order[i - 1]->name,
           order[i]->name);
  std::vector<std::string> names;
  for (const Info& info : infos) names.push_back(info.name);
  std::sort(names.begin(), names.end());
  for (size_t i = 1; i < names.size(); ++i)
    if (names[i] == names[i - 1]) fail(ErrorKind::kBadInput, "{}: tensor '{}' appears twice", path, names[i]);

  // Weights as TensorViews; integer tensors (indices) raw.
  auto place = [&](Info& info, auto& t) {
    t.name = std::move(info.name);
    t.file = path;
    t.shape = std::move(info.shape);
    t.data = file_.data() + data_start + info.offset;
    t.nbytes = info.bytes;
  };
  for (Info& info : infos) {
    if (info.integer) {
      RawTensor raw;
      raw.dtype = info.integer;
      place(info, raw);
      raw_tensors_.push_back(std::move(raw));
    } else {
      TensorView view;
      view.dtype = info.dtype;
      place(info, view);
      tensors_.push_back(std::move(view));
    }
  }
}

}  // namespace nextn
