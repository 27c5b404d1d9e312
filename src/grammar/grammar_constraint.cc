// grammar/grammar_constraint.cc — see grammar_constraint.h.
#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <cmath>

#include "util/timer.h"

namespace nextn::grammar {

namespace {
// Masks kept per compiled grammar; a grammar that keeps reaching new states (deep
// nesting, counted repetitions) starts its mask cache over rather than growing without
// bound (each mask is vocab/8 bytes: 19 KB at 151 936 tokens).
constexpr size_t kMaxCachedMasks = 2048;
// Interned matcher states past which GrammarCache compiles the grammar afresh.
constexpr size_t kMaxSharedStates = 200000;
}  // namespace

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                                 const GrammarLimits& limits)
    : matcher_(std::move(grammar), limits), trie_(std::move(trie)) {}

CompiledGrammar::Stats CompiledGrammar::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t CompiledGrammar::num_states() const {
  std::lock_guard lock(mu_);
  return matcher_.num_states();
}

const std::vector<uint64_t>& CompiledGrammar::allowed_bits(Matcher::State s) {
  auto it = masks_.find(s);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  Stopwatch sw;
  std::vector<uint64_t> bits;
  trie_->allowed(matcher_, s, bits);
  stats_.masks_built += 1;
  stats_.build_seconds += sw.seconds();
  return masks_.emplace(s, std::move(bits)).first->second;
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<CompiledGrammar> compiled, std::vector<int32_t> end_tokens)
    : g_(std::move(compiled)), end_tokens_(std::move(end_tokens)) {
  std::lock_guard lock(g_->mu_);
  history_.push_back(g_->matcher_.start());
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                                     std::vector<int32_t> end_tokens)
    : GrammarConstraint(std::make_shared<CompiledGrammar>(std::move(grammar), std::move(trie)), std::move(end_tokens)) {}

bool GrammarConstraint::is_end(int32_t token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

void GrammarConstraint::fail(const GrammarLimitError& e, size_t at) {
  if (failure_.empty() || at < failed_at_) {
    failure_ = std::string(e.what()) + " (" + e.flag + " raises the limit)";
    failed_at_ = at;
  }
}

bool GrammarConstraint::mask(float* logits, int vocab) {
  std::lock_guard lock(g_->mu_);
  Stopwatch sw;
  Matcher::State s = history_.back();
  const std::vector<uint64_t>* found = nullptr;
  try {
    found = &g_->allowed_bits(s);
  } catch (const GrammarLimitError& e) {
    fail(e, history_.size() - 1);
    for (int t = 0; t < vocab; ++t) logits[t] = -INFINITY;
    return false;
  }
  const std::vector<uint64_t>& bits = *found;
  const int n = std::min(vocab, g_->trie_->vocab());
  // End tokens: allowed (with their own score) exactly where the grammar accepts.
  const bool end_ok = g_->matcher_.accepting(s);
  end_scores_.clear();
  for (int32_t t : end_tokens_) end_scores_.push_back(t >= 0 && t < vocab ? logits[t] : 0.0f);
  bool any = false;  // some token other than an end token is allowed
  for (int w = 0; w * 64 < n; ++w) {
    uint64_t word = bits[size_t(w)];
    int base = w * 64, end = std::min(n, base + 64);
    if (word == ~uint64_t(0)) {
      any = true;
      continue;
    }
    for (int t = base; t < end; ++t) {
      if (!((word >> (t - base)) & 1)) {
        logits[t] = -INFINITY;
      } else if (!any && !is_end(t)) {
        any = true;
      }
    }
  }
  for (int t = n; t < vocab; ++t) logits[t] = -INFINITY;  // ids the tokenizer does not know
  for (size_t i = 0; i < end_tokens_.size(); ++i) {
    int32_t t = end_tokens_[i];
    if (t < 0 || t >= vocab) continue;
    logits[t] = end_ok ? end_scores_[i] : -INFINITY;
    any |= end_ok;
  }
  g_->stats_.masks_applied += 1;
  g_->stats_.apply_seconds += sw.seconds();
  return any;
}

bool GrammarConstraint::allows(int32_t token) {
  std::lock_guard lock(g_->mu_);
  if (token < 0 || token >= g_->trie_->vocab()) return false;
  Matcher::State s = history_.back();
  if (is_end(token)) return g_->matcher_.accepting(s);
  auto it = g_->masks_.find(s);
  if (it != g_->masks_.end()) return (it->second[size_t(token) >> 6] >> (token & 63)) & 1;
  const std::string& b = g_->trie_->bytes(token);
  try {
    return !b.empty() && g_->matcher_.advance(s, b) != Matcher::kDead;
  } catch (const GrammarLimitError& e) {
    fail(e, history_.size());
    return false;
  }
}

void GrammarConstraint::accept(int32_t token) {
  std::lock_guard lock(g_->mu_);
  Matcher::State s = history_.back();
  Matcher::State next = Matcher::kDead;
  try {
    if (token >= 0 && token < g_->trie_->vocab() && !is_end(token) && !g_->trie_->bytes(token).empty())
      next = g_->matcher_.advance(s, g_->trie_->bytes(token));
  } catch (const GrammarLimitError& e) {
    fail(e, history_.size());
  }
  history_.push_back(next);
}

void GrammarConstraint::rollback(int n) {
  n = std::clamp(n, 0, depth());
  history_.resize(history_.size() - size_t(n));
  if (!failure_.empty() && failed_at_ >= history_.size()) failure_.clear();
}

bool GrammarConstraint::complete(int d) const {
  std::lock_guard lock(g_->mu_);
  d = std::clamp(d, 0, depth());
  return !g_->matcher_.can_continue(history_[size_t(d)]);
}

std::shared_ptr<CompiledGrammar> GrammarCache::get(const std::string& key, const std::shared_ptr<const Grammar>& grammar,
                                                   const GrammarLimits& limits) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].first == key) {
      auto entry = std::move(entries_[i]);
      entries_.erase(entries_.begin() + long(i));
      if (entry.second->num_states() > kMaxSharedStates) break;  // grown too big: compile afresh
      entries_.push_back(std::move(entry));
      return entries_.back().second;
    }
  if (entries_.size() >= capacity_) entries_.erase(entries_.begin());
  entries_.emplace_back(key, std::make_shared<CompiledGrammar>(grammar, trie_, limits));
  return entries_.back().second;
}

}  // namespace nextn::grammar
