// grammar/matcher.h — a byte-level pushdown matcher over a Grammar.
// A state is the set of parse stacks still alive after the bytes so far (plus a partly
// read UTF-8 character); stacks are interned frames (parent, element), so a state is a
// small sorted list of ints and is itself interned: State is one int, copyable for free,
// and rolling back is keeping the old int. step() is memoized per (state, byte), which
// is what makes the token-trie walk cheap once the states inside a string or a number
// have been seen. Rule calls in tail position do not grow the stack, so repetitions run
// in constant stack depth. A state may hold at most limits.max_stacks stacks: a grammar
// ambiguous enough to pass that (nested optional repetitions, a rule whose every call
// may end several ways) throws GrammarLimitError, from the constructor when the start
// state already does, else from step().
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/limits.h"

namespace nextn::grammar {

class Matcher {
 public:
  using State = int32_t;
  static constexpr State kDead = -1;  // no stack survived: nothing can follow

  explicit Matcher(std::shared_ptr<const Grammar> grammar, const GrammarLimits& limits = {});

  State start() const { return start_; }
  State step(State s, uint8_t byte);
  State advance(State s, std::string_view bytes);  // kDead as soon as a byte is refused
  // The bytes so far form a complete sentence of the grammar.
  bool accepting(State s) const;
  // Some byte may still follow.
  bool can_continue(State s) const;
  size_t num_states() const { return states_.size(); }

 private:
  struct StateData {
    std::vector<int32_t> stacks;  // sorted frame ids; 0 = the empty stack (accepted)
    uint32_t partial = 0;         // bits of a UTF-8 character read so far
    uint8_t need = 0;             // its continuation bytes still to come
    uint8_t length = 0;           // its length in bytes (2..4; 0 between characters)
  };
  int32_t frame(int32_t parent, uint32_t pos);
  // Appends the stacks `frame` turns into once every rule call at its top is entered.
  // Frames already expanded since the last new_expansion() are skipped: their stacks are
  // in `out` already.
  void new_expansion() {
    epoch_ += 1;
    expanded_count_ = 0;
  }
  void expand(int32_t frame, std::vector<int32_t>& out);
  [[noreturn]] void too_ambiguous() const;
  State intern(std::vector<int32_t>&& stacks, uint32_t partial, uint8_t need, uint8_t length);
  State take_code_point(const StateData& s, uint32_t cp);
  State compute_step(State s, uint8_t byte);

  std::shared_ptr<const Grammar> g_;
  size_t max_stacks_;
  std::vector<int32_t> todo_;               // expand()'s work list
  std::vector<uint32_t> expanded_in_;  // per frame: the expansion that last saw it
  uint32_t epoch_ = 0;                 // the current expansion
  size_t expanded_count_ = 0;          // frames it has seen
  std::vector<int32_t> parent_;
  std::vector<uint32_t> pos_;
  std::unordered_map<uint64_t, int32_t> frame_ids_;
  std::vector<StateData> states_;
  std::unordered_map<std::string, State> state_ids_;
  // transitions_[s][byte]: step()'s memo, a dense row per state (kUnknown until computed):
  // the trie walk reads it once per trie edge, so it must be a plain load.
  static constexpr State kUnknown = -2;
  std::vector<std::unique_ptr<std::array<State, 256>>> transitions_;
  State start_ = kDead;
};

}  // namespace nextn::grammar
