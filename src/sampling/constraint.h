// sampling/constraint.h — a per-sequence rule on which tokens may come next (structured
// output: a grammar, grammar/grammar_constraint.h). The Sampler applies it in one place
// to every distribution it makes (the target's p, greedy choices), and the drafters'
// choose_draft() to theirs (q), so speculative output stays exactly the constrained
// output. accept() moves it on by one token; drafting moves it on by the drafts it
// proposes and rolls them back (speculative/step.cc), so only emitted tokens stay.
#pragma once
#include <cstdint>
#include <string>

namespace nextn {

class Constraint {
 public:
  virtual ~Constraint() = default;
  // Sets the logits of tokens not allowed next to -infinity. Returns false when no token
  // is allowed (the constraint is complete or was given a forbidden token).
  virtual bool mask(float* logits, int vocab) = 0;
  virtual bool allows(int32_t token) = 0;
  // Moves on by `token`; a token that is not allowed leaves nothing allowed.
  virtual void accept(int32_t token) = 0;
  // Undoes the last n accept() calls.
  virtual void rollback(int n) = 0;
  // Tokens accepted so far.
  virtual int depth() const = 0;
  // Whether nothing but the end of generation may follow the first `depth` tokens.
  virtual bool complete(int depth) const = 0;
  // Why the constraint cannot go on from its current tokens though it is not complete
  // (it passed one of its limits); empty while it can. The engine ends the request with
  // this message before emitting anything past it.
  virtual std::string failure() const { return {}; }
};

}  // namespace nextn
