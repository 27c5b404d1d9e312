// tokenizer/json_scan.h — a minimal forward JSON reader used to load the big parts of
// tokenizer.json (model.vocab, model.merges: up to ~800K strings) without building a
// DOM; everything else is handed to nlohmann::json as raw text. Errors are nextn::Error
// naming the file and byte offset.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace nextn {

class JsonScanner {
 public:
  JsonScanner(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

  void skip_ws();
  char peek();                      // next non-space char (0 at end)
  void expect(char c);              // consume c (after whitespace) or fail
  bool consume(char c);             // consume c if it is next
  std::string read_string();        // a JSON string, unescaped to UTF-8
  int64_t read_int();
  std::string_view skip_value();    // the raw text of the next value
  [[noreturn]] void error(std::string_view what) const;

 private:
  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
};

}  // namespace nextn
