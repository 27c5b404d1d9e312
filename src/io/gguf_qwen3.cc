// io/gguf_qwen3.cc — llama.cpp's `qwen3` GGUF: the shared decoder reading
// (gguf_decoder.h) as it is (q/k norms are ordinary tensors).
#include "io/gguf_decoder.h"

namespace nextn {

const GgufDialect& gguf_qwen3_dialect() {
  static const GgufDecoderDialect dialect("qwen3", "Qwen3ForCausalLM", "qwen3");
  return dialect;
}

}  // namespace nextn
