// speculative/options.h — how an engine drafts: which drafter, how many tokens, and
// the benchmark-only synthetic acceptance.
#pragma once
#include <cstdint>
#include <string>

namespace nextn {

struct SpeculativeOptions {
  // none | mtp | assistant | draft | ngram | suffix, or BASE+TAKEOVER (mtp+suffix: a
  // chain, see drafter_registry.cc)
  std::string mode = "none";
  int num_draft_tokens = 3;         // per step; 0 turns drafting off
  bool adaptive = false;            // --num-mtp-tokens auto (num_draft_tokens is then the upper bound)
  std::string assistant_dir;        // --mtp-assistant-model
  std::string draft_model_dir;      // --draft-model
  double synthetic_accept = -1.0;   // --spec-synthetic-accept (benchmark mode only); <0 off
  // --draft-vocab: MTP heads draft only among the first N token ids (BPE ids are
  // roughly in frequency order), cutting the head's output projection. Lossless
  // (q is simply zero elsewhere). -1: auto (32768 when the vocabulary exceeds
  // 65536, else all); 0: the full vocabulary.
  int draft_vocab = -1;
};

}  // namespace nextn
