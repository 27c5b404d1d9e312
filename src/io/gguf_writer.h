// io/gguf_writer.h — writes a GGUF v3 file (little-endian, general.alignment 32):
// metadata first, then tensor infos with precomputed aligned offsets, then each
// tensor's data streamed in the order the infos were added.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "util/dtype.h"

namespace nextn {

class GgufWriter {
 public:
  // Metadata setters; the GGUF value type is the one named.
  void set_u32(const std::string& key, uint32_t v) { kv_.push_back({key, 4, 0, v}); }
  void set_f32(const std::string& key, float v) { kv_.push_back({key, 6, 0, v}); }
  void set_bool(const std::string& key, bool v) { kv_.push_back({key, 7, 0, v}); }
  void set_string(const std::string& key, const std::string& v) { kv_.push_back({key, 8, 0, v}); }
  void set_strings(const std::string& key, const std::vector<std::string>& v) { kv_.push_back({key, 9, 8, v}); }
  void set_i32s(const std::string& key, const std::vector<int32_t>& v) { kv_.push_back({key, 9, 5, v}); }
  void set_f32s(const std::string& key, const std::vector<float>& v) { kv_.push_back({key, 9, 6, v}); }
  void set_bools(const std::string& key, const std::vector<bool>& v) { kv_.push_back({key, 9, 7, v}); }

  // shape in PyTorch order ([out, in]); returns the tensor's index.
  size_t add_tensor(const std::string& name, const std::vector<int64_t>& shape, DType dtype);
  size_t tensor_bytes(size_t index) const { return tensors_[index].bytes; }

  // Writes header, metadata and infos; then call write_data once per tensor, in order.
  void begin(const std::string& path);
  void write_data(size_t index, const void* data, size_t bytes);
  void finish();  // closes the file; throws on a short write

  ~GgufWriter();

 private:
  struct Kv {
    std::string key;
    uint32_t type;       // GGUF value type
    uint32_t elem_type;  // arrays: element type
    nlohmann::json value;
  };
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    uint64_t offset;  // relative to the data section
    size_t bytes;
  };
  void put(const void* p, size_t n);
  void put_string(const std::string& s);

  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
  uint64_t data_bytes_ = 0;
  std::string path_;
  std::FILE* out_ = nullptr;
  size_t next_ = 0;  // next tensor expected by write_data
};

}  // namespace nextn
