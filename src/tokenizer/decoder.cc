// tokenizer/decoder.cc — decoder implementations.
#include "tokenizer/decoder.h"

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nextn {

namespace {

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (auto& t : tokens) {
      std::string raw;
      bool ok = true;
      for (size_t i = 0; i < t.size();) {
        int b = char_to_byte(utf8::next(t, i));
        if (b < 0) { ok = false; break; }
        raw.push_back(static_cast<char>(b));
      }
      bytes += ok ? raw : t;
    }
    tokens.assign(1, utf8::sanitize(bytes));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) t = pattern_.replace_all(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    char c = t[k];
    int h = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t count = 0;
    auto flush = [&] {
      if (count == 0) return;
      if (utf8::is_valid(bytes)) {
        out.push_back(bytes);
      } else {
        std::string r;
        for (size_t k = 0; k < count; ++k) r += utf8::kReplacement;
        out.push_back(r);
      }
      bytes.clear();
      count = 0;
    };
    for (auto& t : tokens) {
      int b = parse_byte_token(t);
      if (b >= 0) {
        bytes.push_back(static_cast<char>(b));
        ++count;
      } else {
        flush();
        out.push_back(t);
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (auto& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, int start, int stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (int k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k) b += content_.size();
      for (int k = 0; k < stop_ && e >= b + content_.size() && t.compare(e - content_.size(), content_.size(), content_) == 0; ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  int start_, stop_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string t = Pattern::literal(replacement_).replace_all(tokens[i], " ");
      if (i == 0 && strip_first_ && !t.empty() && t[0] == ' ') t.erase(0, 1);
      tokens[i] = std::move(t);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> Decoder::from_json(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.value("type", "");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(pattern_from_json(j.at("pattern"), "tokenizer.json: decoder Replace"),
                                            j.at("content").get<std::string>());
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(j.value("content", std::string(" ")), j.value("start", 0), j.value("stop", 0));
  if (type == "Metaspace") {
    std::string scheme = j.value("prepend_scheme", std::string());
    bool strip = scheme.empty() ? j.value("add_prefix_space", true) : scheme != "never";
    return std::make_unique<MetaspaceDecoder>(j.value("replacement", std::string("\u2581")), strip);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (auto& d : j.at("decoders"))
      if (auto p = from_json(d)) parts.push_back(std::move(p));
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  fail(ErrorKind::kUnsupported, "tokenizer.json: unsupported decoder type '{}'", type);
}

}  // namespace nextn
