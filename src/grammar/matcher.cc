// grammar/matcher.cc — see matcher.h.
#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace nextn::grammar {

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, const GrammarLimits& limits)
    : g_(std::move(grammar)), max_stacks_(limits.max_stacks) {
  parent_.push_back(-1);  // frame 0: the empty stack
  pos_.push_back(UINT32_MAX);
  std::vector<int32_t> stacks;
  new_expansion();
  for (uint32_t alt : g_->alternatives[size_t(g_->root)]) expand(frame(0, alt), stacks);
  start_ = intern(std::move(stacks), 0, 0, 0);
}

int32_t Matcher::frame(int32_t parent, uint32_t pos) {
  uint64_t key = (uint64_t(uint32_t(parent)) << 32) | pos;
  auto [it, added] = frame_ids_.try_emplace(key, int32_t(parent_.size()));
  if (added) {
    parent_.push_back(parent);
    pos_.push_back(pos);
  }
  return it->second;
}

void Matcher::too_ambiguous() const {
  throw GrammarLimitError("the grammar is too ambiguous: more than " + std::to_string(max_stacks_) +
                              " ways to parse the output at once (nested optional repetitions?)",
                          "--grammar-max-stacks");
}

// Adds the stacks that `f` turns into once every rule call at its top is entered, so
// each stack's top is a character element (or the stack is empty: frame 0). A work list,
// not recursion: optional items in a row ((a?){10000}) chain as deep as the input makes
// them, and the same frame is reached many ways.
void Matcher::expand(int32_t f, std::vector<int32_t>& out) {
  todo_.clear();
  todo_.push_back(f);
  while (!todo_.empty()) {
    f = todo_.back();
    todo_.pop_back();
    if (expanded_in_.size() <= size_t(f)) expanded_in_.resize(parent_.size(), 0);
    if (expanded_in_[size_t(f)] == epoch_) continue;
    expanded_in_[size_t(f)] = epoch_;
    // Frames passed through are bounded with the stacks made: a chain of empty
    // alternatives makes frames without stacks.
    if (++expanded_count_ > 8 * max_stacks_ + 64) too_ambiguous();
    if (f == 0 || g_->elements[pos_[size_t(f)]].kind == Element::Kind::kChars) {
      out.push_back(f);
      if (out.size() > max_stacks_) too_ambiguous();
      continue;
    }
    const Element& e = g_->elements[pos_[size_t(f)]];
    switch (e.kind) {
      case Element::Kind::kChars: break;
      case Element::Kind::kEnd: todo_.push_back(parent_[size_t(f)]); break;
      case Element::Kind::kRule: {
        uint32_t next = pos_[size_t(f)] + 1;
        // Tail call: nothing left in this frame after the call, so the callee returns
        // straight to our parent.
        int32_t ret = g_->elements[next].kind == Element::Kind::kEnd ? parent_[size_t(f)] : frame(parent_[size_t(f)], next);
        for (uint32_t alt : g_->alternatives[size_t(e.rule)]) todo_.push_back(frame(ret, alt));
        break;
      }
    }
  }
}

Matcher::State Matcher::intern(std::vector<int32_t>&& stacks, uint32_t partial, uint8_t need, uint8_t length) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.empty()) return kDead;
  std::string key(stacks.size() * sizeof(int32_t) + 5, '\0');
  std::memcpy(key.data(), stacks.data(), stacks.size() * sizeof(int32_t));
  std::memcpy(key.data() + stacks.size() * sizeof(int32_t), &partial, 4);
  key.back() = char(need | (length << 4));
  auto [it, added] = state_ids_.try_emplace(std::move(key), State(states_.size()));
  if (added) states_.push_back({std::move(stacks), partial, need, length});
  return it->second;
}

Matcher::State Matcher::take_code_point(const StateData& s, uint32_t cp) {
  std::vector<int32_t> out;
  new_expansion();
  for (int32_t f : s.stacks) {
    if (f == 0) continue;
    const Element& e = g_->elements[pos_[size_t(f)]];
    if (g_->matches(e, cp)) expand(frame(parent_[size_t(f)], pos_[size_t(f)] + 1), out);
  }
  return intern(std::move(out), 0, 0, 0);
}

Matcher::State Matcher::step(State s, uint8_t byte) {
  if (s == kDead) return kDead;
  if (size_t(s) >= transitions_.size()) transitions_.resize(size_t(s) + 1);
  auto& row = transitions_[size_t(s)];
  if (!row) {
    row = std::make_unique<std::array<State, 256>>();
    row->fill(kUnknown);
  }
  State next = (*row)[byte];
  if (next != kUnknown) return next;
  next = compute_step(s, byte);
  (*transitions_[size_t(s)])[byte] = next;  // the row outlives compute_step; the vector may have moved
  return next;
}

Matcher::State Matcher::compute_step(State id, uint8_t b) {
  // states_ may grow below: copy what we read.
  StateData s = states_[size_t(id)];
  if (s.need == 0) {
    if (b < 0x80) return take_code_point(s, b);
    uint8_t need;
    uint32_t bits;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
      bits = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      bits = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      bits = b & 0x07;
    } else {
      return kDead;  // not a UTF-8 lead byte
    }
    s.partial = bits;
    s.need = need;
    s.length = uint8_t(need + 1);
  } else {
    if ((b & 0xC0) != 0x80) return kDead;
    s.partial = (s.partial << 6) | (b & 0x3F);
    s.need -= 1;
  }
  // The code points this prefix can still become: well-formed UTF-8 only (no overlong
  // forms, no surrogates, nothing past U+10FFFF).
  static constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  uint32_t lo = s.partial << (6 * s.need), hi = lo | ((1u << (6 * s.need)) - 1);
  lo = std::max(lo, kMinOfLength[s.length]);
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo >= 0xD800 && hi <= 0xDFFF) return kDead;
  if (lo > hi) return kDead;
  if (s.need == 0) return take_code_point(s, s.partial);
  // Mid-character: alive while some stack accepts a code point this prefix can still become.
  bool viable = false;
  for (int32_t f : s.stacks)
    if (f != 0 && g_->matches_some(g_->elements[pos_[size_t(f)]], lo, hi)) {
      viable = true;
      break;
    }
  if (!viable) return kDead;
  std::vector<int32_t> keep;
  for (int32_t f : s.stacks)
    if (f != 0) keep.push_back(f);
  return intern(std::move(keep), s.partial, s.need, s.length);
}

Matcher::State Matcher::advance(State s, std::string_view bytes) {
  for (char c : bytes) {
    s = step(s, static_cast<uint8_t>(c));
    if (s == kDead) break;
  }
  return s;
}

bool Matcher::accepting(State s) const {
  if (s == kDead) return false;
  const StateData& d = states_[size_t(s)];
  return d.need == 0 && !d.stacks.empty() && d.stacks.front() == 0;
}

bool Matcher::can_continue(State s) const {
  if (s == kDead) return false;
  const StateData& d = states_[size_t(s)];
  return d.need > 0 || d.stacks.back() != 0;
}

}  // namespace nextn::grammar
