#include "util/file.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace nextn {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kNotFound, "{}: cannot open file", path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace nextn
