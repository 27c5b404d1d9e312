// cli/gguf_tokenizer_metadata.h — the tokenizer.ggml.* keys `nextn quantize` writes.
#pragma once
#include <string>

namespace nextn {

struct ModelConfig;
class GgufWriter;

// Reads src_dir/tokenizer.json (+ tokenizer_config.json) and sets the tokenizer keys. A
// SentencePiece-style vocabulary is written in `spm_form`: "llama" (scores), or "gemma4"
// (the merges; llama.cpp's Gemma 4 form) when the tokenizer does not prepend ▁.
void write_tokenizer_metadata(const std::string& src_dir, const ModelConfig& config, const std::string& spm_form,
                              GgufWriter& writer);

}  // namespace nextn
