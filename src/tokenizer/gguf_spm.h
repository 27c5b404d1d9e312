// tokenizer/gguf_spm.h — the SentencePiece-style ("llama", "gemma4") forms of GGUF vocabularies
// (tokenizer/gguf_spm.cc); tokenizer/gguf_vocab.cc dispatches to it.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "tokenizer/gguf_vocab.h"

namespace nextn {

// A tokenizer.json GGUF stores as "llama": BPE with byte fallback (SentencePiece converted).
bool is_spm_tokenizer_json(const nlohmann::json& tokenizer_json);

// tokens, types, scores and add_space_prefix of such a tokenizer.json; bos/eos and the
// rest are the caller's.
GgufVocab spm_vocab_from_tokenizer_json(const nlohmann::json& tokenizer_json, int vocab_size, const std::string& what);

// The tokenizer.json text equivalent to a "llama" vocabulary in GGUF metadata, or to a
// "gemma4" one (the same SentencePiece-style BPE with its merges stored, no ▁ prepended).
std::string spm_tokenizer_json_from_gguf(const nlohmann::json& metadata, const std::string& path);

}  // namespace nextn
