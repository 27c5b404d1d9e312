// speculative/suffix_index.cc — the counted trie of short token strings (suffix_index.h).
// Children are a sibling list: most nodes of text have one or two.
#include "speculative/suffix_index.h"

#include <algorithm>

namespace nextn {

SuffixIndex::SuffixIndex(int depth) : depth_(std::max(2, depth)) { clear(); }

void SuffixIndex::clear() {
  nodes_.assign(1, Node{});
  free_.clear();
}

int32_t SuffixIndex::child(int32_t node, int32_t token) const {
  for (int32_t c = nodes_[size_t(node)].first_child; c >= 0; c = nodes_[size_t(c)].next_sibling)
    if (nodes_[size_t(c)].token == token) return c;
  return -1;
}

int32_t SuffixIndex::child_or_new(int32_t node, int32_t token) {
  if (const int32_t c = child(node, token); c >= 0) return c;
  int32_t c;
  if (!free_.empty()) {
    c = free_.back();
    free_.pop_back();
  } else {
    c = int32_t(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[size_t(c)] = Node{token, 0, -1, nodes_[size_t(node)].first_child};
  nodes_[size_t(node)].first_child = c;
  return c;
}

void SuffixIndex::unlink(int32_t parent, int32_t node) {
  int32_t* link = &nodes_[size_t(parent)].first_child;
  while (*link != node) link = &nodes_[size_t(*link)].next_sibling;
  *link = nodes_[size_t(node)].next_sibling;
  free_.push_back(node);
}

void SuffixIndex::append(Cursor& cursor, int32_t t) {
  for (int32_t& node : cursor.open) {
    node = child_or_new(node, t);
    ++nodes_[size_t(node)].count;
  }
  const int32_t start = child_or_new(0, t);
  ++nodes_[size_t(start)].count;
  cursor.open.push_back(start);
  // open[0] is the oldest start, open.size() tokens deep: at the depth it goes no further.
  if (int(cursor.open.size()) >= depth_) cursor.open.erase(cursor.open.begin());
}

void SuffixIndex::add(std::span<const int32_t> tokens) {
  Cursor cursor;
  for (int32_t t : tokens) append(cursor, t);
}

void SuffixIndex::remove(std::span<const int32_t> tokens) {
  const int n = int(tokens.size());
  for (int i = 0; i < n; ++i) {
    int32_t parent = 0;
    for (int j = i; j < std::min(n, i + depth_); ++j) {
      const int32_t node = child(parent, tokens[size_t(j)]);
      if (node < 0) return;  // not a sequence this index holds: nothing more to take out
      // A count reaching 0 unlinks the node; its children are reached through it until
      // their own counts reach 0 in this walk or a later one.
      if (--nodes_[size_t(node)].count == 0) unlink(parent, node);
      parent = node;
    }
  }
}

SuffixIndex::Match SuffixIndex::longest_suffix(std::span<const int32_t> context, int max_length) const {
  const int len = int(context.size());
  for (int m = std::min({max_length, len, depth_ - 1}); m >= 1; --m) {
    int32_t node = 0;
    for (int i = len - m; i < len && node >= 0; ++i) node = child(node, context[size_t(i)]);
    if (node >= 0 && nodes_[size_t(node)].first_child >= 0) return {m, node};
  }
  return {};
}

double SuffixIndex::continue_match(Match match, int max_tokens, double min_probability,
                                   std::vector<int32_t>& out) const {
  double probability = 1.0;
  int32_t node = match.node;
  for (int depth = match.length, added = 0; node >= 0 && depth < depth_ && added < max_tokens; ++depth, ++added) {
    int32_t best = -1;
    for (int32_t c = nodes_[size_t(node)].first_child; c >= 0; c = nodes_[size_t(c)].next_sibling) {
      const Node& n = nodes_[size_t(c)];
      if (best < 0 || n.count > nodes_[size_t(best)].count ||
          (n.count == nodes_[size_t(best)].count && n.token < nodes_[size_t(best)].token))
        best = c;
    }
    if (best < 0) break;
    const double p = double(nodes_[size_t(best)].count) / double(nodes_[size_t(node)].count);
    if (probability * p < min_probability) break;
    probability *= p;
    out.push_back(nodes_[size_t(best)].token);
    node = best;
  }
  return probability;
}

int32_t SuffixIndex::count(std::span<const int32_t> tokens) const {
  if (tokens.empty() || int(tokens.size()) > depth_) return 0;
  int32_t node = 0;
  for (int32_t t : tokens)
    if ((node = child(node, t)) < 0) return 0;
  return nodes_[size_t(node)].count;
}

}  // namespace nextn
