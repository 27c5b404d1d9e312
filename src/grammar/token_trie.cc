// grammar/token_trie.cc — see token_trie.h.
#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace nextn::grammar {

TokenTrie::TokenTrie(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i)
    if (!bytes_[i].empty()) order.push_back(int32_t(i));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] < bytes_[size_t(b)] || (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b);
  });
  // Sorted insertion appends nodes in pre-order: the path to the previous token is the
  // only open branch; a node's subtree ends when it leaves the path.
  nodes_.push_back(Node{});
  std::vector<int32_t> path = {0};
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& b = bytes_[size_t(id)];
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < b.size() && (*prev)[common] == b[common]) ++common;
    while (path.size() > common + 1) {
      nodes_[size_t(path.back())].end = int32_t(nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < b.size(); ++d) {
      Node n;
      n.byte = static_cast<uint8_t>(b[d]);
      path.push_back(int32_t(nodes_.size()));
      nodes_.push_back(n);
    }
    Node& leaf = nodes_[size_t(path.back())];
    if (leaf.tokens_end == 0) leaf.tokens_begin = leaf.tokens_end = int32_t(ids_.size());
    ids_.push_back(id);
    leaf.tokens_end = int32_t(ids_.size());
    prev = &b;
  }
  while (!path.empty()) {
    nodes_[size_t(path.back())].end = int32_t(nodes_.size());
    path.pop_back();
  }
}

void TokenTrie::walk(int32_t node, Matcher& matcher, Matcher::State s, std::vector<uint64_t>& bits) const {
  const Node& n = nodes_[size_t(node)];
  for (int32_t i = n.tokens_begin; i < n.tokens_end; ++i) {
    int32_t id = ids_[size_t(i)];
    bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
  }
  for (int32_t c = node + 1; c < n.end; c = nodes_[size_t(c)].end) {
    Matcher::State next = matcher.step(s, nodes_[size_t(c)].byte);
    if (next != Matcher::kDead) walk(c, matcher, next, bits);
  }
}

void TokenTrie::allowed(Matcher& matcher, Matcher::State s, std::vector<uint64_t>& bits) const {
  bits.assign((bytes_.size() + 63) / 64, 0);
  if (s == Matcher::kDead) return;
  walk(0, matcher, s, bits);
}

}  // namespace nextn::grammar
