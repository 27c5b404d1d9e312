// cli/npy.cc — the .npy writer (header padded to 64 bytes, as numpy writes it).
#include "cli/npy.h"

#include <cstdint>
#include <cstdio>
#include <memory>

#include "util/error.h"

namespace nextn {

void write_npy_file(const std::string& path, const char* descr, const std::vector<size_t>& shape, const void* data,
                    size_t elem_size) {
  std::string dims;
  size_t count = 1;
  for (size_t d : shape) {
    dims += std::to_string(d) + ",";
    count *= d;
  }
  if (shape.size() > 1) dims.pop_back();  // a 1-d shape keeps its comma: (3,)
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) fail(ErrorKind::kBadInput, "{}: cannot write", path);
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t len = static_cast<uint16_t>(header.size());
  const unsigned char len_bytes[2] = {static_cast<unsigned char>(len & 0xff), static_cast<unsigned char>(len >> 8)};
  bool ok = std::fwrite(magic, 1, 8, f.get()) == 8 && std::fwrite(len_bytes, 1, 2, f.get()) == 2 &&
            std::fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
            (count == 0 || std::fwrite(data, elem_size, count, f.get()) == count);
  if (!ok) fail(ErrorKind::kBadInput, "{}: write failed", path);
}

}  // namespace nextn
