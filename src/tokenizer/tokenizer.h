// tokenizer/tokenizer.h — Hugging Face `tokenizer.json` tokenizers (BPE family), exact
// against HF tokenizers/transformers for the files real models ship (Qwen3, Llama 3,
// DeepSeek-V3, Gemma 3 are tested differentially).
//
// Pipeline of encode(): invalid UTF-8 → U+FFFD; split on added tokens (leftmost longest,
// lstrip/rstrip/single_word); per text segment: normalizer → pre-tokenizer → BPE; then,
// with add_special_tokens, the post-processor (TemplateProcessing, or bos/eos from
// tokenizer_config.json's add_bos_token/add_eos_token when those keys are present, which
// is what transformers' Llama/Gemma fast tokenizers do).
// decode() maps ids to token strings (optionally skipping special added tokens) and runs
// the decoder; it never applies clean_up_tokenization_spaces (call clean_up_tokenization
// yourself if you want transformers' legacy cleanup).
// All methods are const and thread-safe after load().
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nextn {

class Normalizer;
class PreTokenizer;
class Decoder;
class Bpe;
class AddedTokens;

class Tokenizer {
 public:
  // Loads model_dir/tokenizer.json and (if present) model_dir/tokenizer_config.json;
  // for a GGUF model (a .gguf file, or a directory holding one and no tokenizer.json)
  // the tokenizer.ggml.* metadata (tokenizer/gguf_vocab.h).
  // Missing tokenizer.json → kNotFound; unsupported model/component types (Unigram,
  // WordPiece, ...) → kUnsupported, e.g. "tokenizer.json: unsupported model type 'Unigram'".
  static std::unique_ptr<Tokenizer> load(const std::string& model_dir);
  // Same from explicit paths (config_path may be empty).
  static std::unique_ptr<Tokenizer> load_files(const std::string& tokenizer_json_path,
                                               const std::string& config_path);
  // From tokenizer.json text (json_path names it in errors) and a tokenizer_config object.
  static std::unique_ptr<Tokenizer> load_text(const std::string& text, const std::string& json_path,
                                              nlohmann::json config);
  ~Tokenizer();

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  int vocab_size() const { return static_cast<int>(id_to_token_.size()); }  // max id + 1
  std::optional<int32_t> token_id(std::string_view token) const;            // vocab or added token
  std::string token_text(int32_t id) const;                                  // "" if out of range
  bool is_special(int32_t id) const;                                         // special added token
  // The exact bytes `id` adds to the decoded text (skip_special_tokens = false) when it
  // follows other tokens: for a byte-level decoder the token's bytes without UTF-8 repair
  // (a token may hold part of a character), byte-fallback pieces <0xNN> their byte, else
  // the decoded difference after a plain context token. Constrained decoding
  // (grammar/token_trie.h) matches these bytes.
  std::string token_bytes(int32_t id) const;
  bool is_added(int32_t id) const;

  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  std::optional<int32_t> pad_id() const { return pad_id_; }
  const std::string& bos_token() const { return bos_token_; }  // "" when none
  const std::string& eos_token() const { return eos_token_; }

  // tokenizer_config.json as loaded (empty object if absent); chat templates read it.
  const nlohmann::json& config() const { return config_; }
  bool clean_up_tokenization_spaces() const { return clean_up_; }
  // transformers' clean_up_tokenization: " ." → "." etc.
  static std::string clean_up_tokenization(std::string text);

 private:
  // load_text without the translation of JSON type errors into a message naming the file;
  // config_path names where `config` came from in messages.
  static std::unique_ptr<Tokenizer> parse_text(const std::string& text, const std::string& json_path,
                                               nlohmann::json config, const std::string& config_path);
  Tokenizer();
  void encode_text(std::string_view text, bool first_section, std::vector<int32_t>& out) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<Bpe> bpe_;
  std::unique_ptr<AddedTokens> added_;
  std::vector<std::string> id_to_token_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // post-processor for one sequence
  std::optional<int32_t> bos_id_, eos_id_, pad_id_;
  std::string bos_token_, eos_token_;
  nlohmann::json config_ = nlohmann::json::object();
  bool clean_up_ = false;
  bool byte_level_decoder_ = false;  // tokenizer.json's decoder is ByteLevel (alone or in a Sequence)
};

// token_bytes() of every id below `vocab` (the model's vocabulary, which may be larger
// than the tokenizer's), "" for special tokens and ids the tokenizer does not know: the
// vocabulary that constrained decoding matches (grammar/token_trie.h).
std::vector<std::string> vocabulary_bytes(const Tokenizer& tokenizer, int vocab);

// The text of a special-token entry in tokenizer_config.json: a string, an AddedToken
// object {"content": ...}, or null → "".
std::string config_token_text(const nlohmann::json& entry);

}  // namespace nextn
