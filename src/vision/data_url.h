// vision/data_url.h — RFC 2397 data: URLs, the way OpenAI clients send images inline
// ("data:image/png;base64,iVBOR..."). Only base64 payloads are accepted: a
// percent-encoded image would be a few times larger than the body limit allows.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace nextn::vision {

struct DataUrl {
  std::string media_type;  // lower-cased, parameters dropped ("image/png")
  std::string bytes;       // the decoded payload
};

// True when `url` starts with "data:" (case-insensitive).
bool is_data_url(std::string_view url);

// Parses a data: URL; the payload is refused before decoding when it would exceed
// `max_bytes`. nextn::Error kBadInput names the problem (no comma, not base64, a bad
// character and its offset, a missing media type).
DataUrl parse_data_url(std::string_view url, size_t max_bytes);

// Standard base64 (RFC 4648 §4; padding optional, whitespace skipped). Throws kBadInput
// naming the offset of the first character outside the alphabet.
std::string decode_base64(std::string_view text);

// "data:<media_type>;base64,<bytes in standard base64, padded>" (what clients send).
std::string make_data_url(std::string_view media_type, std::string_view bytes);

}  // namespace nextn::vision
