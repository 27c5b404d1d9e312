// server/webui.cc — see webui.h.
#include "server/webui.h"

#include <cstddef>

namespace nextn::server {

// Defined in the generated webui_files.cc.
extern const WebFile kWebFiles[];
extern const size_t kWebFileCount;

const WebFile* find_web_file(std::string_view path) {
  std::string_view name;
  if (path == "/") name = "index.html";
  else if (path.starts_with("/webui/")) name = path.substr(7);
  else return nullptr;
  for (size_t i = 0; i < kWebFileCount; ++i)
    if (kWebFiles[i].name == name) return &kWebFiles[i];
  return nullptr;
}

}  // namespace nextn::server
