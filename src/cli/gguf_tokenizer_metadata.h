// cli/gguf_tokenizer_metadata.h — the tokenizer.ggml.* keys `nextn quantize` writes.
#pragma once
#include <string>

namespace nextn {

struct ModelConfig;
class GgufWriter;

// Reads src_dir/tokenizer.json (+ tokenizer_config.json) and sets the tokenizer keys.
void write_tokenizer_metadata(const std::string& src_dir, const ModelConfig& config, GgufWriter& writer);

}  // namespace nextn
