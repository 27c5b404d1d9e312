// speculative/suffix_index.h — how often each short token string occurs in a set of token
// sequences, as a trie of every substring of up to `depth` tokens with its count: what
// suffix decoding drafts from (Oliaro et al., "SuffixDecoding", 2024). The longest suffix
// of the text so far that the index holds is the match; the drafts follow its most
// frequent continuations while their estimated probability stays high.
//
// A sequence grows one token at a time (append: each of its last `depth` start positions
// goes one node deeper), and can be taken out again whole (remove: the counts of its
// substrings come back off; nodes that reach 0 are reused). Memory: at most `depth` nodes
// of 16 bytes per token held.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace nextn {

class SuffixIndex {
 public:
  explicit SuffixIndex(int depth);

  // A sequence being added: the nodes of its last depth − 1 start positions.
  struct Cursor {
    std::vector<int32_t> open;  // node of seq[i..n) for the starts still below depth
  };
  // Adds token t to the sequence `cursor` follows (every substring ending at it).
  void append(Cursor& cursor, int32_t t);
  // Adds a whole sequence.
  void add(std::span<const int32_t> tokens);
  // Takes a sequence added earlier (the same tokens) back out.
  void remove(std::span<const int32_t> tokens);
  // Forgets everything.
  void clear();

  struct Match {
    int length = 0;    // tokens of the context's suffix found (0: none)
    int32_t node = -1; // its node
  };
  // The longest suffix of `context` of at most max_length tokens that occurs in the index
  // followed by at least one more token.
  Match longest_suffix(std::span<const int32_t> context, int max_length) const;
  // Appends to `out` up to `max_tokens` tokens continuing the match: each the most frequent
  // next token (ties: the smallest id), while the product of their estimated probabilities
  // (count of the continued string / count of the string) stays ≥ min_probability. Stops
  // at the trie's depth. Returns that product.
  double continue_match(Match match, int max_tokens, double min_probability, std::vector<int32_t>& out) const;

  // Occurrences of the string `tokens` (1..depth tokens); for tests and statistics.
  int32_t count(std::span<const int32_t> tokens) const;
  int depth() const { return depth_; }
  size_t nodes_in_use() const { return nodes_.size() - free_.size(); }
  size_t bytes() const { return nodes_.capacity() * sizeof(Node) + free_.capacity() * sizeof(int32_t); }

 private:
  struct Node {
    int32_t token = -1;
    int32_t count = 0;
    int32_t first_child = -1;
    int32_t next_sibling = -1;
  };
  int32_t child(int32_t node, int32_t token) const;
  int32_t child_or_new(int32_t node, int32_t token);
  void unlink(int32_t parent, int32_t node);

  int depth_;
  std::vector<Node> nodes_;  // nodes_[0]: the root (the empty string)
  std::vector<int32_t> free_;
};

}  // namespace nextn
