// io/gguf_writer.cc — GGUF v3 serialization (the GGUF v3 specification: docs/gguf.md in the
// ggml repository).
#include "io/gguf_writer.h"

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace nextn {
namespace {
constexpr uint64_t kAlignment = 32;  // the spec's default, so no general.alignment key is needed
}

GgufWriter::~GgufWriter() {
  if (out_) std::fclose(out_);
}

size_t GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& shape, DType dtype) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  Tensor t{name, shape, dtype, data_bytes_, dtype_row_bytes(dtype, numel)};
  data_bytes_ += (t.bytes + kAlignment - 1) / kAlignment * kAlignment;
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

void GgufWriter::put(const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, out_) != n) fail(ErrorKind::kResource, "{}: write failed: {}", path_, std::strerror(errno));
}

void GgufWriter::put_string(const std::string& s) {
  const uint64_t n = s.size();
  put(&n, 8);
  put(s.data(), s.size());
}

void GgufWriter::begin(const std::string& path) {
  path_ = path;
  out_ = std::fopen(path.c_str(), "wb");
  if (!out_) fail(ErrorKind::kNotFound, "{}: cannot create: {}", path, std::strerror(errno));
  const uint32_t magic = 0x46554747, version = 3;
  const uint64_t n_tensors = tensors_.size(), n_kv = kv_.size();
  put(&magic, 4);
  put(&version, 4);
  put(&n_tensors, 8);
  put(&n_kv, 8);
  for (const Kv& kv : kv_) {
    put_string(kv.key);
    put(&kv.type, 4);
    auto scalar = [&](uint32_t type, const nlohmann::json& v) {
      if (type == 4) { const uint32_t x = v.get<uint32_t>(); put(&x, 4); }
      else if (type == 5) { const int32_t x = v.get<int32_t>(); put(&x, 4); }
      else if (type == 6) { const float x = v.get<float>(); put(&x, 4); }
      else if (type == 7) { const uint8_t x = v.get<bool>() ? 1 : 0; put(&x, 1); }
      else put_string(v.get<std::string>());
    };
    if (kv.type == 9) {
      const uint64_t count = kv.value.size();
      put(&kv.elem_type, 4);
      put(&count, 8);
      for (const auto& v : kv.value) scalar(kv.elem_type, v);
    } else {
      scalar(kv.type, kv.value);
    }
  }
  for (const Tensor& t : tensors_) {
    put_string(t.name);
    const uint32_t n_dims = static_cast<uint32_t>(t.shape.size());
    put(&n_dims, 4);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = static_cast<uint64_t>(t.shape[n_dims - 1 - d]);  // innermost first
      put(&ne, 8);
    }
    const uint32_t type = static_cast<uint32_t>(dtype_info(t.dtype).ggml_type);
    put(&type, 4);
    put(&t.offset, 8);
  }
  const long pos = std::ftell(out_);
  static const char zeros[kAlignment] = {};
  put(zeros, (kAlignment - static_cast<uint64_t>(pos) % kAlignment) % kAlignment);
}

void GgufWriter::write_data(size_t index, const void* data, size_t bytes) {
  if (index != next_ || bytes != tensors_[index].bytes)
    fail(ErrorKind::kInternal, "{}: tensor '{}' written out of order or with {} bytes instead of {}", path_,
         tensors_[index].name, bytes, tensors_[index].bytes);
  put(data, bytes);
  static const char zeros[kAlignment] = {};
  put(zeros, (kAlignment - bytes % kAlignment) % kAlignment);
  ++next_;
}

void GgufWriter::finish() {
  if (next_ != tensors_.size()) fail(ErrorKind::kInternal, "{}: {} of {} tensors written", path_, next_, tensors_.size());
  const int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0) fail(ErrorKind::kResource, "{}: write failed: {}", path_, std::strerror(errno));
}

}  // namespace nextn
