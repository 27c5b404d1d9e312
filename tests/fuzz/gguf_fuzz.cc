// tests/fuzz/gguf_fuzz.cc — any file given as model.gguf is either read or refused with a
// nextn::Error naming the problem (header counts, metadata values, tensor infos, types,
// alignment, offsets, overlaps); never a crash, an out-of-bounds read or a huge
// allocation. Read files are also dequantized, one row per tensor.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_files.h"
#include "io/gguf.h"
#include "kernels/kernels.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = nextn::fuzz::write_scratch("model.gguf", data, size);
  try {
    auto file = nextn::GgufFile::open(path);
    volatile float sink = 0;
    for (const auto& t : file->tensors()) {
      if (t.nbytes == 0 || t.shape.empty()) continue;
      // First and last row: a view past the mapping would fault here.
      const int64_t cols = t.shape.back(), rows = t.numel() / cols;
      const size_t row_bytes = t.nbytes / static_cast<size_t>(rows);
      std::vector<float> out(static_cast<size_t>(cols));
      const uint8_t* p = static_cast<const uint8_t*>(t.data);
      nextn::convert_row(t.dtype, p, cols, out.data());
      nextn::convert_row(t.dtype, p + (rows - 1) * row_bytes, cols, out.data());
      sink = sink + out[0];
    }
  } catch (const nextn::Error&) {
  }
  return 0;
}
