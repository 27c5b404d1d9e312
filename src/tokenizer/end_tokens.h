// tokenizer/end_tokens.h — the one list of tokens that end a generation: the
// checkpoint's eos ids (generation_config.json), the tokenizer's eos token and, for
// chat turns, the end-of-turn tokens chat templates close a turn with. `nextn generate`
// and the server both take their stop tokens from here.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace nextn {

class Tokenizer;

// config_eos: the checkpoint's eos ids. end_of_turn: add the end-of-turn tokens the
// vocabulary has (<|im_end|>, <|eot_id|>, <end_of_turn>, <|end_of_text|>,
// <|endoftext|>): chat models end a turn with them even when generation_config lists
// only <|endoftext|>. Each id appears once, in that order.
std::vector<int32_t> end_of_generation_tokens(const Tokenizer& tokenizer, std::span<const int> config_eos,
                                              bool end_of_turn);

}  // namespace nextn
