// tokenizer/stream_decoder.h — incremental detokenization for streaming responses.
//
//   StreamDecoder dec(tokenizer, /*skip_special_tokens=*/true, {"</answer>", "\n\nUser:"});
//   for each generated id:  out += dec.push(id);  if (dec.stopped()) break;
//   out += dec.flush();
//
// push() returns only newly completed text: it never ends inside a UTF-8 sequence (byte-
// level and byte-fallback characters spanning several tokens are held until complete),
// and the concatenation of all push() results plus flush() equals
// tokenizer.decode(all ids) (up to the first stop string). Stop strings are matched on
// the decoded text across token boundaries; the stop string itself is never emitted, and
// text that might be the start of a stop string is held back until it is decided. After
// a stop string is found, stopped() is true and further push()/flush() return "".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nextn {

class Tokenizer;

class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = true,
                std::vector<std::string> stop_strings = {});

  std::string push(int32_t token);
  std::string flush();  // emits everything still held (incomplete bytes become U+FFFD)

  bool stopped() const { return stopped_; }
  const std::string& matched_stop() const { return matched_stop_; }  // "" if none

 private:
  std::string filter_stops(std::string text, bool final);

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<std::string> stops_;
  std::vector<int32_t> ids_;     // ids_[0..prefix_): last emission (context); rest: pending
  size_t prefix_ = 0;
  std::string prefix_text_;      // decode(ids_[0..prefix_))
  std::string held_;             // decoded text held back for a possible stop string
  bool stopped_ = false;
  std::string matched_stop_;
};

}  // namespace nextn
