// io/safetensors.cc — parsing and validation of the safetensors container format.
#include "io/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

#include "io/json_file.h"
#include "util/error.h"

namespace nextn {
namespace {

// Element size of every dtype the format defines; 0 for unknown names.
size_t element_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4},  {"F16", 2},     {"BF16", 2},    {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U64", 8},  {"U32", 4},     {"U16", 2},     {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1},
      {"F8_E5M2", 1}, {"F8_E8M0", 1}, {"F4", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

bool float_dtype(const std::string& name, DType& out) {
  if (name == "F32") out = DType::kF32;
  else if (name == "F16") out = DType::kF16;
  else if (name == "BF16") out = DType::kBF16;
  else return false;
  return true;
}

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit is 100 MB

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile(path));
  file->parse();
  return file;
}

void SafetensorsFile::parse() {
  const std::string& path = file_.path();
  const size_t size = file_.size();
  if (size < 8) fail(ErrorKind::kBadInput, "{}: truncated safetensors file ({} bytes, no 8-byte header length)", path, size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file_.data()[i];
  if (header_len > kMaxHeaderBytes)
    fail(ErrorKind::kBadInput, "{}: corrupt safetensors header length {} (limit {})", path, header_len, kMaxHeaderBytes);
  if (header_len > size - 8)
    fail(ErrorKind::kBadInput, "{}: truncated safetensors file: header of {} bytes but only {} bytes follow", path,
         header_len, size - 8);
  const char* header_begin = reinterpret_cast<const char*>(file_.data() + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_len);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadInput, "{}: malformed safetensors JSON header: {}", path, e.what());
  }
  if (!header.is_object()) fail(ErrorKind::kBadInput, "{}: safetensors header is not a JSON object", path);

  const unsigned char* data_region = file_.data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  struct Span {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const nlohmann::json& entry = it.value();
    if (!entry.is_object()) fail(ErrorKind::kBadInput, "{}: tensor '{}': header entry is not an object", path, name);
    auto dtype_it = entry.find("dtype");
    auto shape_it = entry.find("shape");
    auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string())
      fail(ErrorKind::kBadInput, "{}: tensor '{}': missing or non-string 'dtype'", path, name);
    if (shape_it == entry.end() || !shape_it->is_array())
      fail(ErrorKind::kBadInput, "{}: tensor '{}': missing or non-array 'shape'", path, name);
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
        !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
      fail(ErrorKind::kBadInput, "{}: tensor '{}': 'data_offsets' must be two non-negative integers", path, name);
    const std::string dtype_name = dtype_it->get<std::string>();
    const size_t esize = element_size(dtype_name);
    if (esize == 0) fail(ErrorKind::kBadInput, "{}: tensor '{}': unknown dtype '{}'", path, name, dtype_name);

    std::vector<int64_t> shape;
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& dim : *shape_it) {
      if (!dim.is_number_unsigned())
        fail(ErrorKind::kBadInput, "{}: tensor '{}': shape entries must be non-negative integers", path, name);
      uint64_t d = dim.get<uint64_t>();
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
      else if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / d) overflow = true;
      else numel *= d;
      shape.push_back(static_cast<int64_t>(d));
    }
    const uint64_t begin = (*offsets_it)[0].get<uint64_t>();
    const uint64_t end = (*offsets_it)[1].get<uint64_t>();
    if (begin > end) fail(ErrorKind::kBadInput, "{}: tensor '{}': data_offsets [{}, {}] are reversed", path, name, begin, end);
    if (end > data_size)
      fail(ErrorKind::kBadInput, "{}: tensor '{}': data_offsets [{}, {}] past the end of the file (data region is {} bytes)",
           path, name, begin, end, data_size);
    if (overflow || numel > std::numeric_limits<uint64_t>::max() / esize || numel * esize != end - begin)
      fail(ErrorKind::kBadInput, "{}: tensor '{}': shape {} of {} needs {} bytes but data_offsets span {} bytes", path,
           name, json_text(*shape_it), dtype_name, overflow ? std::string("too many") : std::to_string(numel * esize),
           end - begin);
    spans.push_back({begin, end, &name});

    DType dtype;
    if (!float_dtype(dtype_name, dtype)) {
      RawTensor raw;
      raw.name = name;
      raw.file = path;
      raw.dtype = dtype_name;
      raw.shape = std::move(shape);
      raw.data = data_region + begin;
      raw.nbytes = end - begin;
      other_tensors_[name] = std::move(raw);
      continue;
    }
    TensorView view;
    view.name = name;
    view.file = path;
    view.dtype = dtype;
    view.shape = std::move(shape);
    view.data = data_region + begin;
    view.nbytes = end - begin;
    tensors_.push_back(std::move(view));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  uint64_t covered_end = 0;
  const std::string* covering = nullptr;
  for (const Span& span : spans) {
    if (span.begin == span.end) continue;
    if (covering && span.begin < covered_end)
      fail(ErrorKind::kBadInput, "{}: tensors '{}' and '{}' overlap in the data region", path, *covering, *span.name);
    covered_end = span.end;
    covering = span.name;
  }
}

}  // namespace nextn
