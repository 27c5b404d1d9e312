// cli/gguf_dump.cc — `nextn gguf-dump FILE.gguf`: validates a GGUF file and lists its
// metadata and tensors (name, type, shape in PyTorch order); with --tensor NAME --out F
// writes that tensor dequantized to float32 (raw little-endian) for inspection.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "io/gguf.h"
#include "kernels/kernels.h"
#include "util/error.h"

namespace nextn {

Command add_gguf_dump_command(CLI::App& root) {
  struct Flags {
    std::string file, tensor, out;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* app = root.add_subcommand("gguf-dump", "Validate a GGUF file and list its metadata and tensors");
  app->add_option("file", f->file, "The .gguf file")->required();
  app->add_option("--tensor", f->tensor, "Tensor (GGUF name) to write dequantized");
  app->add_option("--out", f->out, "With --tensor: output file of float32 values");
  return {app, [f]() -> int {
            auto file = GgufFile::open(f->file);
            if (f->tensor.empty()) {
              std::printf("GGUF v%u, %zu metadata keys, %zu tensors%s\n", file->version(), file->metadata().size(),
                          file->tensors().size(),
                          file->tensors().empty() ? " (a vocabulary-only file: not loadable as a model)" : "");
              for (const auto& [key, value] : file->metadata().items()) {
                std::string text = value.is_array() ? "[" + std::to_string(value.size()) + " values]"
                                                    : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
                if (text.size() > 80) text = text.substr(0, 77) + "...";
                std::printf("  %s = %s\n", key.c_str(), text.c_str());
              }
              for (const TensorView& t : file->tensors())
                std::printf("  %-40s %-5s %s\n", t.name.c_str(), dtype_name(t.dtype), t.shape_string().c_str());
              return 0;
            }
            for (const TensorView& t : file->tensors()) {
              if (t.name != f->tensor) continue;
              if (f->out.empty()) fail(ErrorKind::kBadInput, "--tensor needs --out");
              std::vector<float> values(static_cast<size_t>(t.numel()));
              convert_row(t.dtype, t.data, t.numel(), values.data());
              std::FILE* out = std::fopen(f->out.c_str(), "wb");
              if (!out) fail(ErrorKind::kNotFound, "{}: cannot create", f->out);
              const size_t written = std::fwrite(values.data(), sizeof(float), values.size(), out);
              if (std::fclose(out) != 0 || written != values.size()) fail(ErrorKind::kResource, "{}: write failed", f->out);
              return 0;
            }
            fail(ErrorKind::kNotFound, "{}: no tensor '{}'", f->file, f->tensor);
          }};
}

}  // namespace nextn
