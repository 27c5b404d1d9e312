// tokenizer/tokenizer.cc — loading tokenizer.json/tokenizer_config.json and the
// encode/decode pipelines.
#include "tokenizer/tokenizer.h"

#include <charconv>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include "io/gguf.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "util/file.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace nextn {

namespace {

// Token ids index dense tables (id -> text here, embedding rows in the model). Real
// vocabularies stay below 300K entries, so an id past 2^24 means a damaged file; refusing
// it keeps a single bad entry from allocating gigabytes.
constexpr int64_t kMaxTokenId = int64_t{1} << 24;

nlohmann::json parse_json(std::string_view text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadInput, "{}: invalid JSON: {}", where, e.what());
  }
}

struct RawTokenizerJson {
  nlohmann::json root = nlohmann::json::object();   // everything except model.vocab/merges
  nlohmann::json model = nlohmann::json::object();  // model keys except vocab/merges
  VocabMap vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  bool vocab_is_object = false;
};

RawTokenizerJson scan_tokenizer_json(const std::string& text, const std::string& path) {
  RawTokenizerJson raw;
  JsonScanner s(text, path);
  s.expect('{');
  if (s.consume('}')) return raw;
  do {
    std::string key = s.read_string();
    s.expect(':');
    if (key != "model" || s.peek() != '{') {
      raw.root[key] = parse_json(s.skip_value(), path + ": " + key);
      continue;
    }
    s.expect('{');
    if (s.consume('}')) continue;
    do {
      std::string mkey = s.read_string();
      s.expect(':');
      if (mkey == "vocab" && s.peek() == '{') {
        raw.vocab_is_object = true;
        raw.vocab.reserve(text.size() / 64 + 1024);
        s.expect('{');
        if (!s.consume('}')) {
          do {
            std::string token = s.read_string();
            s.expect(':');
            int64_t id = s.read_int();
            if (id < 0 || id >= kMaxTokenId)
              s.error(fmt::format("model.vocab id {} of token '{}' is outside 0..{}", id, token, kMaxTokenId - 1));
            raw.vocab.emplace(std::move(token), static_cast<int32_t>(id));
          } while (s.consume(','));
          s.expect('}');
        }
      } else if (mkey == "merges" && s.peek() == '[') {
        raw.merges.reserve(text.size() / 40 + 1024);
        s.expect('[');
        if (!s.consume(']')) {
          do {
            if (s.peek() == '[') {
              s.expect('[');
              std::string a = s.read_string();
              s.expect(',');
              std::string b = s.read_string();
              s.expect(']');
              raw.merges.emplace_back(std::move(a), std::move(b));
            } else {
              std::string m = s.read_string();
              size_t sp = m.find(' ', 1);
              if (sp == std::string::npos) s.error("merge without a space");
              raw.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
            }
          } while (s.consume(','));
          s.expect(']');
        }
      } else {
        raw.model[mkey] = parse_json(s.skip_value(), path + ": model." + mkey);
      }
    } while (s.consume(','));
    s.expect('}');
  } while (s.consume(','));
  s.expect('}');
  return raw;
}

std::optional<std::string> optional_string(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<std::string>();
}

}  // namespace

std::string config_token_text(const nlohmann::json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
    return entry["content"].get<std::string>();
  return "";
}

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  if (const std::string gguf = gguf_model_file(model_dir); !gguf.empty()) {
    // The vocabulary lives in the GGUF metadata (tokenizer.ggml.*).
    std::string text;
    nlohmann::json config;
    tokenizer_json_from_gguf(GgufFile::open(gguf)->metadata(), gguf, text, config);
    return load_text(text, gguf + " (tokenizer.ggml.*)", std::move(config));
  }
  fs::path dir(model_dir);
  fs::path json = dir / "tokenizer.json";
  if (!fs::exists(json)) fail(ErrorKind::kNotFound, "{}: no tokenizer.json in the model directory", json.string());
  fs::path config = dir / "tokenizer_config.json";
  return load_files(json.string(), fs::exists(config) ? config.string() : std::string());
}

std::unique_ptr<Tokenizer> Tokenizer::load_files(const std::string& json_path, const std::string& config_path) {
  try {
    nlohmann::json config = nlohmann::json::object();
    if (!config_path.empty()) config = parse_json(read_file(config_path), config_path);
    if (!config.is_object()) fail(ErrorKind::kBadInput, "{}: expected a JSON object", config_path);
    return parse_text(read_file(json_path), json_path, std::move(config), config_path);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type, e.g. "special": "yes"
    fail(ErrorKind::kBadInput, "{}: {}", config_path.empty() ? json_path : json_path + " / " + config_path, e.what());
  }
}

std::unique_ptr<Tokenizer> Tokenizer::load_text(const std::string& text, const std::string& json_path,
                                                nlohmann::json config) {
  try {
    return parse_text(text, json_path, std::move(config), json_path);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadInput, "{}: {}", json_path, e.what());
  }
}

std::unique_ptr<Tokenizer> Tokenizer::parse_text(const std::string& text, const std::string& json_path,
                                                 nlohmann::json config, const std::string& config_path) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  RawTokenizerJson raw = scan_tokenizer_json(text, json_path);
  t->config_ = std::move(config);

  // Model.
  std::string type = raw.model.value("type", "");
  if (type.empty() && raw.vocab_is_object && !raw.merges.empty()) type = "BPE";
  if (type != "BPE") fail(ErrorKind::kUnsupported, "tokenizer.json: unsupported model type '{}'", type);
  if (!raw.vocab_is_object) fail(ErrorKind::kBadInput, "{}: model.vocab must be an object", json_path);
  // The scanner takes merges only as an array: anything else left here is a damaged file
  // (BPE without its merges would tokenize every word into single bytes, silently).
  if (raw.model.contains("merges"))
    fail(ErrorKind::kBadInput, "{}: model.merges must be an array of merges, got {}", json_path,
         raw.model["merges"].dump().substr(0, 80));
  BpeConfig bc;
  bc.unk_token = optional_string(raw.model, "unk_token");
  bc.continuing_subword_prefix = optional_string(raw.model, "continuing_subword_prefix").value_or("");
  bc.end_of_word_suffix = optional_string(raw.model, "end_of_word_suffix").value_or("");
  auto flag = [&](const char* k) { return raw.model.contains(k) && raw.model[k].is_boolean() && raw.model[k].get<bool>(); };
  bc.fuse_unk = flag("fuse_unk");
  bc.byte_fallback = flag("byte_fallback");
  bc.ignore_merges = flag("ignore_merges");
  if (raw.model.contains("dropout") && raw.model["dropout"].is_number() && raw.model["dropout"].get<double>() > 0)
    fail(ErrorKind::kUnsupported, "tokenizer.json: BPE dropout is not supported");

  int32_t max_id = -1;
  for (auto& [tok, id] : raw.vocab) max_id = std::max(max_id, id);

  // Added tokens: tokenizer.json first, then tokenizer_config.json's added_tokens_decoder.
  t->added_ = std::make_unique<AddedTokens>();
  auto add_token = [&](const nlohmann::json& a, int64_t id, const std::string& where) {
    if (id < 0 || id >= kMaxTokenId)
      fail(ErrorKind::kBadInput, "{}: added token id {} is outside 0..{}", where, id, kMaxTokenId - 1);
    if (!a.is_object() || !a.contains("content") || !a["content"].is_string())
      fail(ErrorKind::kBadInput, "{}: added token {} has no string 'content'", where, id);
    AddedToken tok;
    tok.id = static_cast<int32_t>(id);
    tok.content = a.at("content").get<std::string>();
    tok.special = a.value("special", false);
    tok.lstrip = a.value("lstrip", false);
    tok.rstrip = a.value("rstrip", false);
    tok.single_word = a.value("single_word", false);
    tok.normalized = a.value("normalized", !tok.special);
    max_id = std::max(max_id, tok.id);
    t->added_->add(std::move(tok));
  };
  if (raw.root.contains("added_tokens")) {
    const nlohmann::json& list = raw.root["added_tokens"];
    if (!list.is_array()) fail(ErrorKind::kBadInput, "{}: added_tokens must be an array", json_path);
    for (auto& a : list) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer())
        fail(ErrorKind::kBadInput, "{}: an added_tokens entry has no integer 'id'", json_path);
      add_token(a, a["id"].get<int64_t>(), json_path);
    }
  }
  if (t->config_.contains("added_tokens_decoder") && t->config_["added_tokens_decoder"].is_object())
    for (auto& [key, a] : t->config_["added_tokens_decoder"].items()) {
      int64_t id = -1;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size())
        fail(ErrorKind::kBadInput, "{}: added_tokens_decoder key '{}' is not a token id", config_path, key);
      if (id < 0 || id >= kMaxTokenId || !t->added_->find_id(static_cast<int32_t>(id))) add_token(a, id, config_path);
    }

  t->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (auto& [tok, id] : raw.vocab) t->id_to_token_[id] = tok;
  for (auto& a : t->added_->tokens()) t->id_to_token_[a.id] = a.content;

  t->bpe_ = std::make_unique<Bpe>(std::move(raw.vocab), raw.merges, bc);
  t->normalizer_ = Normalizer::from_json(raw.root.value("normalizer", nlohmann::json()));
  t->pre_tokenizer_ = PreTokenizer::from_json(raw.root.value("pre_tokenizer", nlohmann::json()));
  t->decoder_ = Decoder::from_json(raw.root.value("decoder", nlohmann::json()));
  {
    const nlohmann::json dec = raw.root.value("decoder", nlohmann::json());
    auto is_byte_level = [](const nlohmann::json& d) { return d.is_object() && d.value("type", "") == "ByteLevel"; };
    t->byte_level_decoder_ = is_byte_level(dec);
    if (dec.is_object() && dec.value("type", "") == "Sequence" && dec.contains("decoders") && dec["decoders"].is_array())
      for (const auto& part : dec["decoders"]) t->byte_level_decoder_ |= is_byte_level(part);
  }

  // Special tokens named by tokenizer_config.json.
  auto& cfg = t->config_;
  auto named = [&](const char* key, std::string& text_out) -> std::optional<int32_t> {
    if (!cfg.contains(key)) return std::nullopt;
    std::string text = config_token_text(cfg[key]);
    if (text.empty()) return std::nullopt;
    text_out = text;
    return t->token_id(text);
  };
  std::string pad_text;
  t->bos_id_ = named("bos_token", t->bos_token_);
  t->eos_id_ = named("eos_token", t->eos_token_);
  t->pad_id_ = named("pad_token", pad_text);
  t->clean_up_ = cfg.value("clean_up_tokenization_spaces", false);

  // Post-processor.
  std::function<void(const nlohmann::json&)> post = [&](const nlohmann::json& p) {
    if (p.is_null()) return;
    std::string ptype = p.value("type", "");
    if (ptype == "ByteLevel") return;
    if (ptype == "Sequence") {
      for (auto& q : p.at("processors")) post(q);
      return;
    }
    if (ptype == "TemplateProcessing") {
      bool seen_a = false;
      for (auto& item : p.at("single")) {
        if (item.contains("Sequence")) {
          seen_a = true;
          continue;
        }
        std::string name = item.at("SpecialToken").at("id").get<std::string>();
        auto& specials = p.at("special_tokens");
        if (!specials.contains(name))
          fail(ErrorKind::kBadInput, "tokenizer.json: post_processor special token '{}' is not defined", name);
        for (auto& id : specials[name].at("ids")) (seen_a ? t->suffix_ids_ : t->prefix_ids_).push_back(id.get<int32_t>());
      }
      return;
    }
    if (ptype == "RobertaProcessing" || ptype == "BertProcessing") {
      t->prefix_ids_.push_back(p.at("cls").at(1).get<int32_t>());
      t->suffix_ids_.push_back(p.at("sep").at(1).get<int32_t>());
      return;
    }
    fail(ErrorKind::kUnsupported, "tokenizer.json: unsupported post_processor type '{}'", ptype);
  };
  post(raw.root.value("post_processor", nlohmann::json()));
  bool has_add_bos = cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean();
  bool has_add_eos = cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean();
  if (has_add_bos || has_add_eos) {
    t->prefix_ids_.clear();
    t->suffix_ids_.clear();
    if (has_add_bos && cfg["add_bos_token"].get<bool>() && t->bos_id_) t->prefix_ids_.push_back(*t->bos_id_);
    if (has_add_eos && cfg["add_eos_token"].get<bool>() && t->eos_id_) t->suffix_ids_.push_back(*t->eos_id_);
  }
  return t;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (auto* a = added_->find_content(token)) return a->id;
  return bpe_->token_id(token);
}

std::string Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return id_to_token_[id];
}

bool Tokenizer::is_special(int32_t id) const {
  auto* a = added_->find_id(id);
  return a && a->special;
}

bool Tokenizer::is_added(int32_t id) const { return added_->find_id(id) != nullptr; }

void Tokenizer::encode_text(std::string_view text, bool first_section, std::vector<int32_t>& out) const {
  std::string normalized = normalizer_ ? normalizer_->normalize(std::string(text)) : std::string(text);
  if (normalized.empty()) return;
  std::vector<std::string> pieces{std::move(normalized)};
  if (pre_tokenizer_) pre_tokenizer_->apply(pieces, first_section);
  for (auto& p : pieces) bpe_->encode_word(p, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view raw_text, bool add_special_tokens) const {
  std::string sanitized;
  std::string_view text = raw_text;
  if (!utf8::is_valid(raw_text)) {
    sanitized = utf8::sanitize(raw_text);
    text = sanitized;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens) out.insert(out.end(), prefix_ids_.begin(), prefix_ids_.end());
  auto segments = added_->split(text);
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].id >= 0) out.push_back(segments[i].id);
    else encode_text(segments[i].text, i == 0, out);
  }
  if (add_special_tokens) out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (skip_special_tokens && is_special(id)) continue;
    tokens.push_back(id_to_token_[id]);
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder_->decode_chain(tokens);
  std::string out;
  for (auto& t : tokens) out += t;
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  const std::string& t = id_to_token_[size_t(id)];
  if (byte_level_decoder_) {
    // As ByteLevelDecoder: every character mapped back to its byte, or the text as it is
    // when some character is not a byte symbol (added tokens such as <|im_end|>).
    std::string raw;
    for (size_t i = 0; i < t.size();) {
      int b = char_to_byte(utf8::next(t, i));
      if (b < 0) return t;
      raw.push_back(static_cast<char>(b));
    }
    return raw;
  }
  if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
    int v = std::stoi(t.substr(3, 2), nullptr, 16);
    return std::string(1, static_cast<char>(v));
  }
  // Decoders that treat the first token specially (Metaspace strips its space): decode
  // after a context token and keep the difference.
  std::optional<int32_t> ctx = token_id("a");
  if (!ctx || *ctx == id) return decode(std::span<const int32_t>(&id, 1), false);
  int32_t pair[2] = {*ctx, id};
  std::string before = decode(std::span<const int32_t>(pair, 1), false);
  std::string both = decode(std::span<const int32_t>(pair, 2), false);
  return both.compare(0, before.size(), before) == 0 ? both.substr(before.size()) : decode(std::span<const int32_t>(&id, 1), false);
}

std::vector<std::string> vocabulary_bytes(const Tokenizer& tokenizer, int vocab) {
  std::vector<std::string> bytes(size_t(std::max(vocab, 0)));
  for (int32_t id = 0; id < vocab && id < tokenizer.vocab_size(); ++id)
    if (!tokenizer.is_special(id)) bytes[size_t(id)] = tokenizer.token_bytes(id);
  return bytes;
}

std::string Tokenizer::clean_up_tokenization(std::string text) {
  static const std::pair<const char*, const char*> rules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : rules) {
    std::string out;
    std::string_view f(from);
    size_t pos = 0, prev = 0;
    while ((pos = text.find(f, prev)) != std::string::npos) {
      out.append(text, prev, pos - prev);
      out.append(to);
      prev = pos + f.size();
    }
    out.append(text, prev, std::string::npos);
    text = std::move(out);
  }
  return text;
}

}  // namespace nextn
