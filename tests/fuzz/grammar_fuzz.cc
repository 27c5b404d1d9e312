// tests/fuzz/grammar_fuzz.cc — structured-output input: first byte even, the rest is a
// GBNF grammar; odd, a JSON Schema. Either it is refused with a GrammarError /
// SchemaError / GrammarLimitError (grammar/limits.h, under small limits here so that the
// fuzzer reaches them) / JSON parse error, or it compiles, and then every compiled schema must
// parse as GBNF (but for the grammar's limits and left-recursive $ref cycles; anything
// else is a compiler bug: abort), and mask() and allows() agree; the matcher and the token
// trie's masks run over a small vocabulary for a few steps; never a crash, a stack
// overflow or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"

using namespace nextn::grammar;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const auto trie = [] {
    std::vector<std::string> vocab;
    for (int b = 0; b < 256; ++b) vocab.push_back(std::string(1, char(b)));
    for (const char* t : {"{\"", "\":", "\",", "true", "null", "12", "-", "\\u00", "\xc3\xa9", "\xe2\x82", "  "})
      vocab.push_back(t);
    vocab.push_back("");
    return std::make_shared<TokenTrie>(vocab);
  }();
  GrammarLimits limits;
  limits.schema_max_depth = 64;
  limits.max_elements = 1 << 16;
  limits.max_stacks = 256;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string gbnf;
  if (data[0] % 2 == 0) {
    gbnf = text;
  } else {
    auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) return 0;
    try {
      gbnf = json_schema_to_gbnf(schema, Whitespace::kFlexible, limits);
    } catch (const SchemaError&) {
      return 0;
    } catch (const GrammarLimitError&) {
      return 0;
    }
  }
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = std::make_shared<Grammar>(parse_gbnf(gbnf, "root", limits));
  } catch (const GrammarLimitError&) {
    return 0;
  } catch (const GrammarError& e) {
    // A compiled schema may only fail on the grammar's limits or on a $ref cycle that
    // matches nothing first (left recursion); any other refusal is a compiler bug.
    std::string what = e.what();
    // A schema's pattern or enum may also ask for what no UTF-8 text holds.
    bool expected = what.find("left-recursive") != std::string::npos || what.find("nest") != std::string::npos ||
                    what.find("matches no string") != std::string::npos || what.find("surrogate") != std::string::npos ||
                    what.find("U+10FFFF") != std::string::npos;
    if (data[0] % 2 == 1 && !expected) std::abort();
    return 0;
  }
  std::shared_ptr<CompiledGrammar> compiled;
  try {
    compiled = std::make_shared<CompiledGrammar>(grammar, trie, limits);
  } catch (const GrammarLimitError&) {
    return 0;  // too ambiguous from its first character
  }
  GrammarConstraint c(compiled, {int32_t(trie->vocab() - 1)});
  std::vector<float> logits(size_t(trie->vocab()));
  for (int step = 0; step < 8; ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    if (!c.mask(logits.data(), trie->vocab())) break;  // complete, or past a limit (c.failure())
    int32_t pick = -1;
    for (int t = 0; t < trie->vocab(); ++t)
      if (logits[size_t(t)] == 0.0f && (pick < 0 || (t * 7919 + step) % 13 == 0)) pick = t;
    if (pick < 0 || !c.allows(pick)) std::abort();  // mask() and allows() disagree
    c.accept(pick);
  }
  return 0;
}
