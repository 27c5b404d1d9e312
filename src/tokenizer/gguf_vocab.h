// tokenizer/gguf_vocab.h — tokenizers as GGUF stores them (tokenizer.ggml.*) ↔
// tokenizer.json + tokenizer_config.json, for byte-level BPE ("gpt2") vocabularies
// with the pre-tokenizers of the supported families (tokenizer.ggml.pre: "qwen2",
// "llama-bpe", "gpt-2", "deepseek-v3"), and SentencePiece-style "llama" vocabularies
// (pieces with scores, byte fallback; tokenizer/gguf_spm.h).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace nextn {

// GGUF token types (llama.cpp's llama_token_type).
enum GgufTokenType : int32_t { kTokenNormal = 1, kTokenUnknown = 2, kTokenControl = 3, kTokenUserDefined = 4,
                               kTokenUnused = 5, kTokenByte = 6 };

struct GgufVocab {
  std::string model = "gpt2";              // tokenizer.ggml.model
  std::string pre;                         // tokenizer.ggml.pre
  std::vector<std::string> tokens;         // [n_vocab] token text by id
  std::vector<int32_t> token_types;        // [n_vocab] GgufTokenType
  std::vector<std::string> merges;         // "a b" in rank order (gpt2; the "llama" form's source merges too)
  std::vector<float> scores;               // [n_vocab] piece scores (llama only)
  bool add_space_prefix = false;           // llama: ▁ prepended to the text
  int32_t bos = -1, eos = -1, pad = -1;    // token ids, -1 when none
  bool add_bos = false, add_eos = false;   // tokenizer.ggml.add_bos_token / add_eos_token
  std::string chat_template;               // tokenizer.chat_template ("" when none)
};

// From tokenizer.json (+ tokenizer_config.json, possibly an empty object). `vocab_size`
// pads the token list to the model's embedding rows. Throws kUnsupported naming `what`
// for tokenizers GGUF's gpt2 form cannot express.
GgufVocab gguf_vocab_from_tokenizer_json(const nlohmann::json& tokenizer_json, const nlohmann::json& config,
                                         int vocab_size, const std::string& what);

// From GGUF metadata: writes the equivalent tokenizer.json text and tokenizer_config.json
// object. `path` names the file in errors.
void tokenizer_json_from_gguf(const nlohmann::json& metadata, const std::string& path, std::string& tokenizer_json,
                              nlohmann::json& config);

// Just the tokenizer_config.json part: bos/eos/pad tokens, add_bos/add_eos, chat_template.
nlohmann::json tokenizer_config_from_gguf(const nlohmann::json& metadata, const std::string& path);

}  // namespace nextn
