// tokenizer/end_tokens.cc — see end_tokens.h.
#include "tokenizer/end_tokens.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace nextn {

std::vector<int32_t> end_of_generation_tokens(const Tokenizer& tokenizer, std::span<const int> config_eos,
                                              bool end_of_turn) {
  std::vector<int32_t> out;
  auto add = [&](int32_t id) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  };
  for (int id : config_eos) add(id);
  if (auto e = tokenizer.eos_id()) add(*e);
  if (end_of_turn)
    for (const char* t : {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end_of_text|>", "<|endoftext|>"})
      if (auto id = tokenizer.token_id(t)) add(*id);
  return out;
}

}  // namespace nextn
