// tests/fuzz/config_fuzz.cc — any config.json (next to an empty but valid safetensors
// file) is either turned into a ModelConfig by the architecture registry or refused with
// a nextn::Error naming the key; never a crash or an uncaught JSON type error.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_files.h"
#include "io/checkpoint.h"
#include "model/architecture.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool weights = [] {
    // A safetensors file with no tensors: 8-byte header length, then "{}".
    const uint8_t empty[10] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    nextn::fuzz::write_scratch("model.safetensors", empty, sizeof empty);
    return true;
  }();
  (void)weights;
  nextn::fuzz::write_scratch("config.json", data, size);
  try {
    auto ckpt = nextn::Checkpoint::open(nextn::fuzz::scratch_dir());
    nextn::ModelConfig config = nextn::parse_model_config(*ckpt);
    (void)config;
  } catch (const nextn::Error&) {
  }
  return 0;
}
