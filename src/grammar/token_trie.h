// grammar/token_trie.h — the model's vocabulary as a byte trie, built once per model,
// and the walk that lists the tokens a matcher state allows: depth-first over the trie,
// stepping the matcher one byte per edge and skipping every subtree whose prefix the
// grammar refuses. Token bytes are what each id adds to the decoded text (byte-level BPE:
// the raw bytes, possibly part of a UTF-8 character); "" marks ids that are never
// allowed by the grammar (special tokens, unused ids).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace nextn::grammar {

class TokenTrie {
 public:
  explicit TokenTrie(std::vector<std::string> token_bytes);

  int vocab() const { return int(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  size_t num_nodes() const { return nodes_.size(); }
  // Sets bit t of `bits` (vocab() bits, cleared first) for every token whose bytes the
  // matcher can read from state s.
  void allowed(Matcher& matcher, Matcher::State s, std::vector<uint64_t>& bits) const;

 private:
  struct Node {
    uint8_t byte = 0;
    int32_t end = 0;                       // one past the last node of this subtree (pre-order)
    int32_t tokens_begin = 0, tokens_end = 0;  // ids_[begin..end): tokens spelled by the path here
  };
  void walk(int32_t node, Matcher& matcher, Matcher::State s, std::vector<uint64_t>& bits) const;
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;  // pre-order; node 0 is the root (the empty prefix)
  std::vector<int32_t> ids_;
};

}  // namespace nextn::grammar
