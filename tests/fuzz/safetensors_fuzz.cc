// tests/fuzz/safetensors_fuzz.cc — any file given as model.safetensors is either read or
// refused with a nextn::Error naming the problem (header length, JSON, dtype, shape,
// offsets, overlaps); never a crash, an out-of-bounds read or a huge allocation.
#include <cstddef>
#include <cstdint>

#include "fuzz_files.h"
#include "io/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = nextn::fuzz::write_scratch("model.safetensors", data, size);
  try {
    auto file = nextn::SafetensorsFile::open(path);
    // Touch every tensor's first and last byte: a view past the mapping would fault here.
    volatile uint8_t sink = 0;
    for (const auto& t : file->tensors()) {
      if (t.nbytes == 0) continue;
      const uint8_t* p = static_cast<const uint8_t*>(t.data);
      sink = sink + p[0] + p[t.nbytes - 1];
    }
  } catch (const nextn::Error&) {
  }
  return 0;
}
