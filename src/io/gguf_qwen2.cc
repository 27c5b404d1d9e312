// io/gguf_qwen2.cc — llama.cpp's `qwen2` GGUF (Qwen2, and MiMo's trunk with its MTP
// layers as nextn blocks): the shared decoder reading (gguf_decoder.h); q/k/v biases are
// required (nextn runs no Qwen2 without them).
#include "io/gguf_decoder.h"
#include "util/error.h"

namespace nextn {
namespace {

class Qwen2Dialect : public GgufDecoderDialect {
 public:
  Qwen2Dialect() : GgufDecoderDialect("qwen2", "Qwen2ForCausalLM", "qwen2") {}

 protected:
  void family_config(const GgufMetadata& md, const std::map<std::string, const TensorView*>& tensors,
                     nlohmann::json&) const override {
    if (!has_q_bias(tensors))
      fail(ErrorKind::kUnsupported, "{}: qwen2 architecture without attention biases is not supported", md.path());
  }
};

}  // namespace

const GgufDialect& gguf_qwen2_dialect() {
  static const Qwen2Dialect dialect;
  return dialect;
}

}  // namespace nextn
