// tokenizer/bpe.h — the BPE model of tokenizer.json: vocab, ranked merges, unk token,
// byte_fallback (<0xXX> tokens), fuse_unk, ignore_merges, continuing_subword_prefix and
// end_of_word_suffix. Turns one pre-tokenized word into token ids (with a word cache).
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nextn {

struct BpeConfig {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class Bpe {
 public:
  // vocab: token text → id; merges: (left, right) token texts in rank order.
  Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeConfig config);

  // Appends the ids of `word` to out.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }
  std::optional<int32_t> token_id(std::string_view token) const;

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  static uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

  struct Merge {
    int32_t rank;
    int32_t id;
  };
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::unordered_map<char32_t, int32_t> char_ids_;  // single-code-point tokens (no prefix)
  BpeConfig config_;
  std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];  // <0xXX> ids, -1 when absent

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace nextn
