// grammar/grammar_constraint.cc — see grammar_constraint.h.
#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <cmath>

#include "util/timer.h"

namespace nextn::grammar {

namespace {
// Masks cached per sequence; a grammar that keeps reaching new states (deep nesting,
// counted repetitions) starts the cache over rather than growing without bound.
constexpr size_t kMaxCachedMasks = 4096;
}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                                     std::vector<int32_t> end_tokens)
    : matcher_(std::move(grammar)), trie_(std::move(trie)), end_tokens_(std::move(end_tokens)) {
  history_.push_back(matcher_.start());
}

bool GrammarConstraint::is_end(int32_t token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

const std::vector<uint64_t>& GrammarConstraint::allowed_bits() {
  Matcher::State s = history_.back();
  auto it = masks_.find(s);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  Stopwatch sw;
  std::vector<uint64_t> bits;
  trie_->allowed(matcher_, s, bits);
  bool end_ok = matcher_.accepting(s);
  for (int32_t t : end_tokens_) {
    if (t < 0 || t >= trie_->vocab()) continue;
    uint64_t bit = uint64_t(1) << (t & 63);
    bits[size_t(t) >> 6] = end_ok ? bits[size_t(t) >> 6] | bit : bits[size_t(t) >> 6] & ~bit;
  }
  stats_.masks_built += 1;
  stats_.build_seconds += sw.seconds();
  return masks_.emplace(s, std::move(bits)).first->second;
}

bool GrammarConstraint::mask(float* logits, int vocab) {
  Stopwatch sw;
  const std::vector<uint64_t>& bits = allowed_bits();
  bool any = false;
  const int n = std::min(vocab, trie_->vocab());
  for (int w = 0; w * 64 < n; ++w) {
    uint64_t word = bits[size_t(w)];
    int base = w * 64, end = std::min(n, base + 64);
    if (word == ~uint64_t(0) && end - base == 64) {
      any = true;
      continue;
    }
    for (int t = base; t < end; ++t)
      if (!((word >> (t - base)) & 1)) logits[t] = -INFINITY;
    any |= word != 0;
  }
  for (int t = n; t < vocab; ++t) logits[t] = -INFINITY;  // ids the tokenizer does not know
  stats_.masks_applied += 1;
  stats_.apply_seconds += sw.seconds();
  return any;
}

bool GrammarConstraint::allows(int32_t token) {
  if (token < 0 || token >= trie_->vocab()) return false;
  Matcher::State s = history_.back();
  if (is_end(token)) return matcher_.accepting(s);
  auto it = masks_.find(s);
  if (it != masks_.end()) return (it->second[size_t(token) >> 6] >> (token & 63)) & 1;
  const std::string& b = trie_->bytes(token);
  return !b.empty() && matcher_.advance(s, b) != Matcher::kDead;
}

void GrammarConstraint::accept(int32_t token) {
  Matcher::State s = history_.back();
  Matcher::State next = Matcher::kDead;
  if (token >= 0 && token < trie_->vocab() && !is_end(token) && !trie_->bytes(token).empty())
    next = matcher_.advance(s, trie_->bytes(token));
  history_.push_back(next);
}

void GrammarConstraint::rollback(int n) {
  n = std::clamp(n, 0, depth());
  history_.resize(history_.size() - size_t(n));
}

bool GrammarConstraint::complete(int d) const {
  d = std::clamp(d, 0, depth());
  return !matcher_.can_continue(history_[size_t(d)]);
}

}  // namespace nextn::grammar
