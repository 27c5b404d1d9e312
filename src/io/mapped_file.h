// io/mapped_file.h — a read-only memory mapping of a whole file (RAII).
#pragma once
#include <cstddef>
#include <string>

namespace nextn {

class MappedFile {
 public:
  // Throws nextn::Error (kNotFound / kBadInput) naming the path.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace nextn
