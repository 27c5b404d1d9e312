// tokenizer/regex.h — PCRE2 (UTF + UCP, JIT) wrapper used by Split pre-tokenizers and
// Replace normalizers/decoders. Patterns come from tokenizer.json ("Regex" entries).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace nextn {

class Regex {
 public:
  // Compiles pattern; a bad pattern is a nextn::Error naming `where`.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches in text (valid UTF-8) as [begin, end) byte ranges;
  // empty matches are skipped.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
  std::string where_;
};

// A literal-or-regex pattern as tokenizer.json writes it: {"String": s} or {"Regex": r}.
class Pattern {
 public:
  Pattern() = default;
  static Pattern literal(std::string s);
  static Pattern regex(const std::string& r, const std::string& where);
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  std::string replace_all(std::string_view text, std::string_view with) const;

 private:
  std::string literal_;
  std::shared_ptr<Regex> regex_;
};

// {"String": s} or {"Regex": r} from tokenizer.json; `where` names the field in errors.
Pattern pattern_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace nextn
