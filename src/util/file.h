// util/file.h — reading a whole file, with an error that names it.
#pragma once
#include <string>

namespace nextn {

// The file's bytes; throws nextn::Error(kNotFound, "<path>: cannot open file").
std::string read_file(const std::string& path);

}  // namespace nextn
