// server/webui.h — the built-in chat page (web/*), compiled into the binary.
// web/embed.cmake turns every file of web/ into a byte array at build time
// (webui_files.cc in the build folder); the server answers GET / with index.html
// and GET /webui/NAME with the other files. Nothing is read from disk at run time.
#pragma once
#include <string_view>

namespace nextn::server {

struct WebFile {
  std::string_view name;          // file name in web/, e.g. "app.js"
  std::string_view content_type;  // from the extension
  std::string_view body;
};

// The file served at URL path `path` ("/" is index.html); nullptr when there is none.
const WebFile* find_web_file(std::string_view path);

}  // namespace nextn::server
