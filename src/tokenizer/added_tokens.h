// tokenizer/added_tokens.h — the "added_tokens" of tokenizer.json: a byte trie that
// splits input text into plain-text segments and added tokens (leftmost, longest match,
// as HF tokenizers and transformers.js), honouring lstrip, rstrip and single_word.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nextn {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

class AddedTokens {
 public:
  void add(AddedToken token);

  struct Segment {
    std::string_view text;  // plain text (when id < 0)
    int32_t id = -1;        // added token id, or -1 for text
  };
  // Splits text; text segments may be empty-free; whitespace eaten by lstrip/rstrip is dropped.
  std::vector<Segment> split(std::string_view text) const;

  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Longest token starting at text[pos], as index into tokens_ (-1 if none).
  int longest_match(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  // Trie: node → children via (node << 8 | byte) key; terminal token index per node.
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_{-1};
  bool first_byte_[256] = {};
};

}  // namespace nextn
