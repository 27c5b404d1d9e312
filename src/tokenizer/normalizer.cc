// tokenizer/normalizer.cc — normalizer implementations (Unicode forms via ICU).
#include "tokenizer/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/bytestream.h>
#include <unicode/unistr.h>
#include <unicode/locid.h>
#include <unicode/uchar.h>

#include <vector>

#include "tokenizer/regex.h"
#include "util/error.h"

namespace nextn {

namespace {

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

std::string icu_normalize(const icu::Normalizer2* n, const std::string& s) {
  UErrorCode status = U_ZERO_ERROR;
  if (n->isNormalizedUTF8(s, status) && U_SUCCESS(status)) return s;
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(s.size()));
  n->normalizeUTF8(0, s, sink, nullptr, status);
  if (U_FAILURE(status)) fail(ErrorKind::kInternal, "unicode normalization failed: {}", u_errorName(status));
  return out;
}

const icu::Normalizer2* instance(const char* which) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  std::string w = which;
  if (w == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  else if (w == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  else if (w == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  else n = icu::Normalizer2::getNFKDInstance(status);
  if (U_FAILURE(status) || !n) fail(ErrorKind::kInternal, "ICU {} data unavailable", which);
  return n;
}

}  // namespace

std::string unicode_nfc(const std::string& s) { return is_ascii(s) ? s : icu_normalize(instance("NFC"), s); }
std::string unicode_nfkc(const std::string& s) { return is_ascii(s) ? s : icu_normalize(instance("NFKC"), s); }
std::string unicode_nfd(const std::string& s) { return is_ascii(s) ? s : icu_normalize(instance("NFD"), s); }
std::string unicode_nfkd(const std::string& s) { return is_ascii(s) ? s : icu_normalize(instance("NFKD"), s); }

std::string unicode_lower(const std::string& s) {
  if (is_ascii(s)) {
    std::string out = s;
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::string unicode_upper(const std::string& s) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  u.toUpper(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::string unicode_title(const std::string& s) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s), r;
  bool prev_cased = false;
  for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1)) {
    UChar32 c = u.char32At(i);
    bool cased = u_hasBinaryProperty(c, UCHAR_CASED);
    r.append(cased ? (prev_cased ? u_tolower(c) : u_totitle(c)) : c);
    prev_cased = cased;
  }
  std::string out;
  r.toUTF8String(out);
  return out;
}

std::string unicode_capitalize(const std::string& s) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s), r;
  for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1)) {
    UChar32 c = u.char32At(i);
    r.append(i == 0 ? u_totitle(c) : u_tolower(c));
  }
  std::string out;
  r.toUTF8String(out);
  return out;
}

namespace {

class FormNormalizer : public Normalizer {
 public:
  explicit FormNormalizer(std::string form) : form_(std::move(form)) {}
  std::string normalize(std::string s) const override {
    if (form_ == "NFC") return unicode_nfc(s);
    if (form_ == "NFKC") return unicode_nfkc(s);
    if (form_ == "NFD") return unicode_nfd(s);
    return unicode_nfkd(s);
  }

 private:
  std::string form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  std::string normalize(std::string s) const override { return unicode_lower(s); }
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(Pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  std::string normalize(std::string s) const override { return pattern_.replace_all(s, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : prepend_(std::move(p)) {}
  std::string normalize(std::string s) const override { return s.empty() ? s : prepend_ + s; }

 private:
  std::string prepend_;
};

bool is_unicode_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string s) const override;

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string s) const override {
    for (auto& p : parts_) s = p->normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

// Defined after the anonymous namespace helpers it uses.
std::string StripNormalizer::normalize(std::string s) const {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  int32_t b = 0, e = u.length();
  if (left_)
    while (b < e && is_unicode_space(u.char32At(b))) b = u.moveIndex32(b, 1);
  if (right_)
    while (e > b && is_unicode_space(u.char32At(u.moveIndex32(e, -1)))) e = u.moveIndex32(e, -1);
  std::string out;
  u.tempSubStringBetween(b, e).toUTF8String(out);
  return out;
}

Pattern pattern_from_json(const nlohmann::json& j, const std::string& where) {
  if (j.contains("String")) return Pattern::literal(j["String"].get<std::string>());
  if (j.contains("Regex")) return Pattern::regex(j["Regex"].get<std::string>(), where);
  fail(ErrorKind::kBadInput, "{}: pattern must have \"String\" or \"Regex\"", where);
}

std::unique_ptr<Normalizer> Normalizer::from_json(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.value("type", "");
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<FormNormalizer>(type);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(pattern_from_json(j.at("pattern"), "tokenizer.json: normalizer Replace"),
                                               j.at("content").get<std::string>());
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(j.at("prepend").get<std::string>());
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (auto& n : j.at("normalizers"))
      if (auto p = from_json(n)) parts.push_back(std::move(p));
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  fail(ErrorKind::kUnsupported, "tokenizer.json: unsupported normalizer type '{}'", type);
}

}  // namespace nextn
