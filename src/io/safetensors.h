// io/safetensors.h — one memory-mapped .safetensors file, fully validated on open.
// Checks: 8-byte little-endian header length within the file, a JSON object header,
// per tensor a known dtype, a non-negative shape whose byte size equals the
// data_offsets span, offsets inside the data region, and no two tensors overlapping.
// Float tensors (F32/F16/BF16) become TensorViews; tensors of other dtypes are kept
// as RawTensors (packed formats read them; requiring one as a float gives a clear error).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "io/tensor.h"

namespace nextn {

class SafetensorsFile {
 public:
  // Throws nextn::Error naming the file (and tensor) on any problem.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // Tensors with a dtype nextn cannot compute with, by name.
  const std::map<std::string, RawTensor>& other_tensors() const { return other_tensors_; }

 private:
  explicit SafetensorsFile(const std::string& path) : file_(path) {}
  void parse();

  MappedFile file_;
  std::vector<TensorView> tensors_;
  std::map<std::string, RawTensor> other_tensors_;
};

}  // namespace nextn
