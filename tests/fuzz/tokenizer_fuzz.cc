// tests/fuzz/tokenizer_fuzz.cc — two halves, chosen by the first byte of the input:
//   even: the rest is a tokenizer.json; it loads (then encodes and decodes a sample)
//         or is refused with a nextn::Error naming the file and entry;
//   odd:  the rest is text for the embedded tiny model's tokenizer; encoding and
//         decoding it never crash, and for valid UTF-8 streaming decode equals
//         one-shot decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_files.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

const nextn::Tokenizer& tiny() {
  static const auto t = nextn::Tokenizer::load(NEXTN_SOURCE_DIR "/models/nextn-tiny");
  return *t;
}

void exercise(const nextn::Tokenizer& t, const std::string& text) {
  std::vector<int32_t> ids = t.encode(text, true);
  std::string once = t.decode(ids, false);
  nextn::StreamDecoder stream(t, false);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  // Compared on valid UTF-8 input: for broken bytes the two may place U+FFFD differently.
  if (nextn::utf8::is_valid(text) && streamed != once) std::abort();  // the streaming contract (tests/tokenizer) broken
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 1) {
    exercise(tiny(), std::string(reinterpret_cast<const char*>(data + 1), size - 1));
    return 0;
  }
  std::string path = nextn::fuzz::write_scratch("tokenizer.json", data + 1, size - 1);
  try {
    auto t = nextn::Tokenizer::load_files(path, "");
    exercise(*t, "Hello world! 123 <|im_start|>user\n\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80");
  } catch (const nextn::Error&) {
  }
  return 0;
}
