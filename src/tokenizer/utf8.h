// tokenizer/utf8.h — small UTF-8 helpers shared by the tokenizer and the streaming decoder:
// code point iteration, encoding, lossy repair of invalid input (U+FFFD per maximal
// invalid subpart, as WHATWG TextDecoder and Rust's from_utf8_lossy do) and the
// "complete prefix" test used to never emit half a character.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace nextn::utf8 {

// Decodes the code point at s[i] (s must be valid UTF-8) and advances i.
char32_t next(std::string_view s, size_t& i);
// Appends the UTF-8 encoding of cp to out.
void append(std::string& out, char32_t cp);
// Length in bytes of the valid sequence starting at s[i], or 0 if invalid/incomplete there.
size_t valid_sequence_length(std::string_view s, size_t i);
// True if s is entirely valid UTF-8.
bool is_valid(std::string_view s);
// s with every maximal invalid subpart replaced by U+FFFD (returns s unchanged if valid).
std::string sanitize(std::string_view s);
// Length of the longest prefix of s that does not end inside an incomplete (but so far
// valid) multi-byte sequence: the bytes after it may still become a character.
size_t complete_prefix_length(std::string_view s);

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace nextn::utf8
