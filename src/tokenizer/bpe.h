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

// Hashing for heterogeneous (string_view) lookups in string-keyed maps.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using VocabMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Open-addressing map from a (left id, right id) pair to its merge (rank, merged id).
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  void reserve(size_t n);
  void insert(uint64_t key, Merge m);  // first insertion of a key wins (lowest rank)
  const Merge* find(uint64_t key) const {
    size_t i = mix(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static size_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{0, 0};
  };
  std::vector<Slot> slots_{Slot{}};
  size_t mask_ = 0;
};

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
  Bpe(VocabMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeConfig config);

  // Appends the ids of `word` to out.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const VocabMap& vocab() const { return vocab_; }
  std::optional<int32_t> token_id(std::string_view token) const;

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  static uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

  VocabMap vocab_;
  MergeTable merges_;
  std::vector<int32_t> bmp_ids_;                    // single-code-point tokens below U+10000 (-1: none)
  std::unordered_map<char32_t, int32_t> char_ids_;  // single-code-point tokens above
  BpeConfig config_;
  std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];  // <0xXX> ids, -1 when absent

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace nextn
