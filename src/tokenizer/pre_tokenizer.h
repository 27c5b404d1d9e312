// tokenizer/pre_tokenizer.h — tokenizer.json "pre_tokenizer" section: Split (PCRE2 regex
// or literal, all five behaviors, invert), ByteLevel (GPT-2 byte↔char map, optional
// regex and prefix space), Metaspace, Digits, Whitespace/WhitespaceSplit and Sequence.
// A pre-tokenizer turns one normalized text segment into the "words" BPE works on.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nextn {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits/rewrites every piece in place. `first_section` is true for the text segment
  // at the very start of the input (Metaspace prepend_scheme "first").
  virtual void apply(std::vector<std::string>& pieces, bool first_section) const = 0;
  static std::unique_ptr<PreTokenizer> from_json(const nlohmann::json& j);
};

// GPT-2's reversible byte → printable code point map (and its inverse; -1 = not a byte char).
const std::vector<char32_t>& byte_to_char();
int char_to_byte(char32_t c);
// The UTF-8 text of the byte-level rendering of raw bytes.
std::string byte_level_encode(std::string_view bytes);

}  // namespace nextn
