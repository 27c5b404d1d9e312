// tokenizer/bpe.cc — BPE merging (lowest rank first, leftmost on ties, as HF tokenizers).
#include "tokenizer/bpe.h"

#include <fmt/format.h>

#include <queue>
#include <thread>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nextn {

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
}

void MergeTable::insert(uint64_t key, Merge m) {
  size_t i = mix(key) & mask_;
  while (slots_[i].key != kEmpty) {
    if (slots_[i].key == key) return;
    i = (i + 1) & mask_;
  }
  slots_[i] = Slot{key, m};
}

Bpe::Bpe(VocabMap vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeConfig config)
    : vocab_(std::move(vocab)), config_(std::move(config)) {
  // Resolve merge strings to ids (hash lookups dominate loading: split over two threads).
  struct Resolved {
    uint64_t key;
    int32_t id;
  };
  std::vector<Resolved> resolved(merges.size());
  std::vector<size_t> bad(2, SIZE_MAX);
  auto work = [&](size_t part, size_t begin, size_t end) {
    std::string merged;
    const std::string& prefix = config_.continuing_subword_prefix;
    for (size_t rank = begin; rank < end; ++rank) {
      const auto& [a, b] = merges[rank];
      auto ia = vocab_.find(a), ib = vocab_.find(b);
      merged.assign(a);
      if (!prefix.empty() && b.compare(0, prefix.size(), prefix) == 0) merged.append(b, prefix.size());
      else merged.append(b);
      auto im = vocab_.find(merged);
      if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end()) {
        bad[part] = std::min(bad[part], rank);
        continue;
      }
      resolved[rank] = {pair_key(ia->second, ib->second), im->second};
    }
  };
  size_t half = merges.size() / 2;
  if (merges.size() > 20000) {
    std::thread helper(work, 1, half, merges.size());
    work(0, 0, half);
    helper.join();
  } else {
    work(0, 0, merges.size());
  }
  size_t first_bad = std::min(bad[0], bad[1]);
  if (first_bad != SIZE_MAX)
    fail(ErrorKind::kBadInput, "tokenizer.json: merge {} '{} {}' uses a token missing from model.vocab", first_bad,
         merges[first_bad].first, merges[first_bad].second);
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < resolved.size(); ++rank)
    merges_.insert(resolved[rank].key, MergeTable::Merge{static_cast<int32_t>(rank), resolved[rank].id});

  bmp_ids_.assign(0x10000, -1);
  for (auto& [text, id] : vocab_) {
    size_t i = 0;
    if (text.empty()) continue;
    char32_t c = utf8::next(text, i);
    if (i != text.size()) continue;
    if (c < 0x10000) bmp_ids_[c] = id;
    else char_ids_[c] = id;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(fmt::format("<0x{:02X}>", b));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  if (config_.unk_token) {
    auto it = vocab_.find(*config_.unk_token);
    if (it != vocab_.end()) unk_id_ = it->second;
  }
}

std::optional<int32_t> Bpe::token_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (config_.ignore_merges) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  bool cacheable = word.size() <= 256;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() > 200000) cache_.clear();
    cache_.emplace(std::string(word), std::move(ids));
  }
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // 1. Initial symbols: one per code point (with prefix/suffix), byte fallback, unk.
  std::vector<int32_t> sym;
  sym.reserve(word.size());
  bool last_was_unk = false;
  const bool plain = config_.continuing_subword_prefix.empty() && config_.end_of_word_suffix.empty();
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    char32_t c = utf8::next(word, i);
    std::optional<int32_t> id;
    if (plain) {
      if (c < 0x10000) {
        if (bmp_ids_[c] >= 0) id = bmp_ids_[c];
      } else {
        auto it = char_ids_.find(c);
        if (it != char_ids_.end()) id = it->second;
      }
    } else {
      std::string s = start > 0 ? config_.continuing_subword_prefix : std::string();
      s.append(word.substr(start, i - start));
      if (i == word.size()) s += config_.end_of_word_suffix;
      auto it = vocab_.find(s);
      if (it != vocab_.end()) id = it->second;
    }
    if (id) {
      sym.push_back(*id);
      last_was_unk = false;
      continue;
    }
    if (config_.byte_fallback) {
      bool all = true;
      for (size_t k = start; k < i; ++k) all = all && byte_ids_[static_cast<unsigned char>(word[k])] >= 0;
      if (all) {
        for (size_t k = start; k < i; ++k) sym.push_back(byte_ids_[static_cast<unsigned char>(word[k])]);
        last_was_unk = false;
        continue;
      }
    }
    if (unk_id_) {
      if (!(config_.fuse_unk && last_was_unk)) sym.push_back(*unk_id_);
      last_was_unk = true;
    }
  }
  size_t n = sym.size();
  if (n < 2) {
    out.insert(out.end(), sym.begin(), sym.end());
    return;
  }
  // 2. Merges. Short words: repeated scan; long words: heap with lazy invalidation.
  if (n <= 48) {
    while (sym.size() > 1) {
      int32_t best_rank = INT32_MAX, best_id = -1;
      size_t best_pos = 0;
      for (size_t p = 0; p + 1 < sym.size(); ++p) {
        const MergeTable::Merge* m = merges_.find(pair_key(sym[p], sym[p + 1]));
        if (m && m->rank < best_rank) {
          best_rank = m->rank;
          best_id = m->id;
          best_pos = p;
        }
      }
      if (best_id < 0) break;
      sym[best_pos] = best_id;
      sym.erase(sym.begin() + best_pos + 1);
    }
    out.insert(out.end(), sym.begin(), sym.end());
    return;
  }
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left, right, id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<int32_t> prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (size_t p = 0; p < n; ++p) {
    prev[p] = static_cast<int32_t>(p) - 1;
    next[p] = p + 1 < n ? static_cast<int32_t>(p + 1) : -1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int32_t p) {
    if (p < 0 || next[p] < 0) return;
    const MergeTable::Merge* m = merges_.find(pair_key(sym[p], sym[next[p]]));
    if (m) heap.push({m->rank, p, sym[p], sym[next[p]], m->id});
  };
  for (size_t p = 0; p + 1 < n; ++p) push(static_cast<int32_t>(p));
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    int32_t p = c.pos;
    if (!alive[p] || next[p] < 0 || sym[p] != c.left || sym[next[p]] != c.right) continue;
    int32_t q = next[p];
    sym[p] = c.id;
    alive[q] = 0;
    next[p] = next[q];
    if (next[q] >= 0) prev[next[q]] = p;
    push(prev[p]);
    push(p);
  }
  for (int32_t p = 0; p >= 0; p = next[p]) out.push_back(sym[p]);
}

}  // namespace nextn
