// tokenizer/pre_tokenizer.cc — pre-tokenizer implementations.
#include "tokenizer/pre_tokenizer.h"

#include <array>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nextn {

const std::vector<char32_t>& byte_to_char() {
  static const std::vector<char32_t> table = [] {
    std::vector<char32_t> t(256);
    char32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<char32_t>(b) : extra++;
    }
    return t;
  }();
  return table;
}

int char_to_byte(char32_t c) {
  static const std::array<int, 512> inverse = [] {
    std::array<int, 512> inv;
    inv.fill(-1);
    const auto& t = byte_to_char();
    for (int b = 0; b < 256; ++b) inv[t[b]] = b;
    return inv;
  }();
  return c < 512 ? inverse[c] : -1;
}

std::string byte_level_encode(std::string_view bytes) {
  static const std::array<std::string, 256> encoded = [] {
    std::array<std::string, 256> e;
    for (int b = 0; b < 256; ++b) utf8::append(e[b], byte_to_char()[b]);
    return e;
  }();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += encoded[b];
  return out;
}

namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const std::string& b) {
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  fail(ErrorKind::kUnsupported, "tokenizer.json: unsupported split behavior '{}'", b);
}

// Splits `text` at `matches` per HF SplitDelimiterBehavior; appends pieces to out.
void split_by(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches, Behavior behavior,
              bool invert, std::vector<std::string>& out) {
  // Build (begin, end, is_match) spans covering the text.
  struct Span { size_t b, e; bool match; };
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < text.size()) spans.push_back({prev, text.size(), invert});

  switch (behavior) {
    case Behavior::kRemoved:
      for (auto& s : spans)
        if (!s.match) out.emplace_back(text.substr(s.b, s.e - s.b));
      break;
    case Behavior::kIsolated:
      for (auto& s : spans) out.emplace_back(text.substr(s.b, s.e - s.b));
      break;
    case Behavior::kMergedWithPrevious: {
      bool prev_open = false;  // last emitted piece is a non-match that can absorb a match
      for (auto& s : spans) {
        if (s.match && prev_open) {
          out.back().append(text.substr(s.b, s.e - s.b));
          prev_open = false;
        } else {
          out.emplace_back(text.substr(s.b, s.e - s.b));
          prev_open = !s.match;
        }
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      std::string pending;
      for (auto& s : spans) {
        if (s.match) {
          // A match followed by another match: HF keeps them separate; flush the older one.
          if (!pending.empty()) out.push_back(std::move(pending));
          pending.assign(text.substr(s.b, s.e - s.b));
        } else {
          out.push_back(pending + std::string(text.substr(s.b, s.e - s.b)));
          pending.clear();
        }
      }
      if (!pending.empty()) out.push_back(pending);
      break;
    }
    case Behavior::kContiguous: {
      bool last_match = false;
      for (size_t i = 0; i < spans.size(); ++i) {
        auto& s = spans[i];
        if (s.match && last_match && i > 0) out.back().append(text.substr(s.b, s.e - s.b));
        else out.emplace_back(text.substr(s.b, s.e - s.b));
        last_match = s.match;
      }
      break;
    }
  }
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern p, Behavior b, bool invert) : pattern_(std::move(p)), behavior_(b), invert_(invert) {}
  void apply(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size() * 4);
    for (auto& piece : pieces) split_by(piece, pattern_.find_all(piece), behavior_, invert_, out);
    pieces = std::move(out);
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

const char* kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Regex>(kGpt2Pattern, "ByteLevel pre-tokenizer");
  }
  void apply(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size());
    for (auto& piece : pieces) {
      std::string text = piece;
      if (add_prefix_space_ && !text.empty() && text[0] != ' ') text.insert(text.begin(), ' ');
      if (regex_) {
        std::vector<std::string> parts;
        split_by(text, regex_->find_all(text), Behavior::kIsolated, false, parts);
        for (auto& p : parts) out.push_back(byte_level_encode(p));
      } else {
        out.push_back(byte_level_encode(text));
      }
    }
    pieces = std::move(out);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, std::string scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(std::move(scheme)), split_(split) {}
  void apply(std::vector<std::string>& pieces, bool first_section) const override {
    std::vector<std::string> out;
    for (auto& piece : pieces) {
      std::string text = Pattern::literal(" ").replace_all(piece, replacement_);
      bool prepend = scheme_ == "always" || (scheme_ == "first" && first_section);
      if (prepend && text.compare(0, replacement_.size(), replacement_) != 0) text = replacement_ + text;
      if (!split_) {
        out.push_back(std::move(text));
        continue;
      }
      split_by(text, Pattern::literal(replacement_).find_all(text), Behavior::kMergedWithNext, false, out);
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_, scheme_;
  bool split_;
};

class DigitsPreTokenizer : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  void apply(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    for (auto& piece : pieces) {
      std::vector<std::pair<size_t, size_t>> m;
      for (size_t i = 0; i < piece.size(); ++i)
        if (piece[i] >= '0' && piece[i] <= '9') m.emplace_back(i, i + 1);
      split_by(piece, m, individual_ ? Behavior::kIsolated : Behavior::kContiguous, false, out);
    }
    pieces = std::move(out);
  }

 private:
  bool individual_;
};

class RegexFindPreTokenizer : public PreTokenizer {  // Whitespace: keeps only the matches
 public:
  explicit RegexFindPreTokenizer(const char* pattern) : regex_(pattern, "Whitespace pre-tokenizer") {}
  void apply(std::vector<std::string>& pieces, bool) const override {
    std::vector<std::string> out;
    for (auto& piece : pieces)
      for (auto [b, e] : regex_.find_all(piece)) out.push_back(piece.substr(b, e - b));
    pieces = std::move(out);
  }

 private:
  Regex regex_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void apply(std::vector<std::string>& pieces, bool first_section) const override {
    for (auto& p : parts_) p->apply(pieces, first_section);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.value("type", "");
  if (type == "Split")
    return std::make_unique<SplitPreTokenizer>(pattern_from_json(j.at("pattern"), "tokenizer.json: pre_tokenizer Split"),
                                               parse_behavior(j.value("behavior", "Isolated")),
                                               j.value("invert", false));
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(j.value("add_prefix_space", true), j.value("use_regex", true));
  if (type == "Metaspace") {
    std::string scheme = j.value("prepend_scheme", std::string());
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    return std::make_unique<MetaspacePreTokenizer>(j.value("replacement", std::string("\u2581")), scheme,
                                                   j.value("split", true));
  }
  if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(j.value("individual_digits", false));
  if (type == "Whitespace") return std::make_unique<RegexFindPreTokenizer>("\\w+|[^\\w\\s]+");
  if (type == "WhitespaceSplit") return std::make_unique<RegexFindPreTokenizer>("\\S+");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (auto& p : j.at("pretokenizers"))
      if (auto t = from_json(p)) parts.push_back(std::move(t));
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  fail(ErrorKind::kUnsupported, "tokenizer.json: unsupported pre_tokenizer type '{}'", type);
}

}  // namespace nextn
