// tokenizer/normalizer.h — tokenizer.json "normalizer" section: NFC, NFD, NFKC, NFKD
// (ICU), Lowercase, Replace, Prepend, Strip and Sequence. Applied to each text segment
// between added tokens before pre-tokenization.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace nextn {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
  // Builds the normalizer described by j (null → nullptr). Unknown types are a
  // nextn::Error naming tokenizer.json.
  static std::unique_ptr<Normalizer> from_json(const nlohmann::json& j);
};

// Unicode normalization forms and lowercasing, also used elsewhere.
std::string unicode_nfc(const std::string& s);
std::string unicode_nfkc(const std::string& s);
std::string unicode_nfd(const std::string& s);
std::string unicode_nfkd(const std::string& s);
std::string unicode_lower(const std::string& s);
std::string unicode_upper(const std::string& s);
// Python str.title() / str.capitalize() (simple per-character case mappings).
std::string unicode_title(const std::string& s);
std::string unicode_capitalize(const std::string& s);

}  // namespace nextn
