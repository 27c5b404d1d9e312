// io/json_file.cc — JSON files of checkpoint directories.
#include "io/json_file.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace nextn {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kNotFound, "{}: file not found", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadInput, "{}: malformed JSON: {}", path, e.what());
  }
}

}  // namespace nextn
