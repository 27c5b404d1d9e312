// tokenizer/gguf_vocab.cc — the two directions of the GGUF tokenizer mapping.
#include "tokenizer/gguf_vocab.h"

#include <map>
#include <vector>

#include "tokenizer/gguf_spm.h"
#include "util/error.h"

namespace nextn {
namespace {

// tokenizer.ggml.pre → the Split regexes (in order) and normalizer of the Hugging Face
// tokenizer it names; gpt-2 is ByteLevel's own regex.
struct PreTokenizerForm {
  const char* pre;
  std::vector<std::string> regexes;
  const char* normalizer;  // "" for none
};

const std::vector<PreTokenizerForm>& pre_tokenizer_forms() {
  static const std::vector<PreTokenizerForm> forms = {
      {"qwen2",
       {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "NFC"},
      // Qwen3.5 / 3.6 (llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN35): Qwen2's form with combining
      // marks (\p{M}) kept in the letter run and out of the symbol run, so a Devanagari or
      // Thai vowel sign stays with its consonant.
      {"qwen35",
       {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
        "\\s+(?!\\S)|\\s+"},
       "NFC"},
      {"llama-bpe",
       {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       ""},
      {"deepseek-v3",
       {"\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
        "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
       ""},
      {"gpt-2", {}, ""},
  };
  return forms;
}

nlohmann::json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

// The tokenizer.ggml.pre name of a tokenizer.json pre_tokenizer.
std::string find_pre(const nlohmann::json& pre, const std::string& what) {
  if (pre.value("type", "") == "ByteLevel" && pre.value("use_regex", true)) return "gpt-2";
  std::vector<std::string> regexes;
  if (pre.value("type", "") == "Sequence")
    for (const auto& p : pre.at("pretokenizers"))
      if (p.value("type", "") == "Split" && p.contains("pattern") && p["pattern"].contains("Regex"))
        regexes.push_back(p["pattern"]["Regex"].get<std::string>());
  for (const PreTokenizerForm& f : pre_tokenizer_forms())
    if (!regexes.empty() && regexes == f.regexes) return f.pre;
  fail(ErrorKind::kUnsupported, "{}: pre-tokenizer has no GGUF tokenizer.ggml.pre name nextn knows (qwen2, qwen35, "
       "llama-bpe, deepseek-v3, gpt-2)", what);
}

std::string token_text(const nlohmann::json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) return entry["content"].get<std::string>();
  return "";
}

const nlohmann::json& require(const nlohmann::json& md, const std::string& key, const std::string& path) {
  if (!md.contains(key)) fail(ErrorKind::kNotFound, "{}: missing metadata key '{}'", path, key);
  return md.at(key);
}

}  // namespace

// The gpt2 form's tokens, types and merges; then bos/eos/pad, add_bos/add_eos and the
// chat template of tokenizer_config.json (both forms).
static void fill_gpt2_tokens(const nlohmann::json& tj, int vocab_size, GgufVocab& v);
static void special_tokens_from_config(const nlohmann::json& config, GgufVocab& v);

GgufVocab gguf_vocab_from_tokenizer_json(const nlohmann::json& tj, const nlohmann::json& config, int vocab_size,
                                         const std::string& what) {
  GgufVocab v;
  const nlohmann::json& model = tj.at("model");
  if (model.value("type", "BPE") != "BPE")
    fail(ErrorKind::kUnsupported, "{}: only BPE tokenizers (byte-level, or SentencePiece with byte fallback) can be "
         "written to GGUF by nextn", what);
  if (is_spm_tokenizer_json(tj)) {
    v = spm_vocab_from_tokenizer_json(tj, vocab_size, what);
  } else {
    v.pre = find_pre(tj.value("pre_tokenizer", nlohmann::json()), what);
    fill_gpt2_tokens(tj, vocab_size, v);
  }
  special_tokens_from_config(config, v);
  return v;
}

void fill_gpt2_tokens(const nlohmann::json& tj, int vocab_size, GgufVocab& v) {
  const nlohmann::json& model = tj.at("model");
  int max_id = vocab_size - 1;
  for (const auto& [tok, id] : model.at("vocab").items()) max_id = std::max(max_id, id.get<int>());
  for (const auto& a : tj.value("added_tokens", nlohmann::json::array())) max_id = std::max(max_id, a.at("id").get<int>());
  v.tokens.assign(static_cast<size_t>(max_id + 1), "");
  v.token_types.assign(static_cast<size_t>(max_id + 1), kTokenUnused);
  for (const auto& [tok, id] : model.at("vocab").items()) {
    v.tokens[id.get<size_t>()] = tok;
    v.token_types[id.get<size_t>()] = kTokenNormal;
  }
  for (const auto& a : tj.value("added_tokens", nlohmann::json::array())) {
    const size_t id = a.at("id").get<size_t>();
    v.tokens[id] = a.at("content").get<std::string>();
    v.token_types[id] = a.value("special", false) ? kTokenControl : kTokenUserDefined;
  }
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i].empty()) v.tokens[i] = "[PAD" + std::to_string(i) + "]";  // unused rows need distinct names
  for (const auto& m : model.at("merges"))
    v.merges.push_back(m.is_string() ? m.get<std::string>() : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
}

void special_tokens_from_config(const nlohmann::json& config, GgufVocab& v) {
  auto id_of = [&](const char* key) -> int32_t {
    const std::string text = config.contains(key) ? token_text(config[key]) : "";
    for (size_t i = 0; i < v.tokens.size() && !text.empty(); ++i)
      if (v.tokens[i] == text) return static_cast<int32_t>(i);
    return -1;
  };
  v.bos = id_of("bos_token");
  v.eos = id_of("eos_token");
  v.pad = id_of("pad_token");
  v.add_bos = config.value("add_bos_token", false);
  v.add_eos = config.value("add_eos_token", false);
  if (config.contains("chat_template") && config["chat_template"].is_string())
    v.chat_template = config["chat_template"].get<std::string>();
}

void tokenizer_json_from_gguf(const nlohmann::json& md, const std::string& path, std::string& tokenizer_json,
                              nlohmann::json& config) {
  const nlohmann::json& model = require(md, "tokenizer.ggml.model", path);
  if (!model.is_string()) fail(ErrorKind::kBadInput, "{}: metadata key 'tokenizer.ggml.model' must be a string", path);
  if (model == "llama" || model == "gemma4") {
    require(md, "tokenizer.ggml.tokens", path);
    if (!md["tokenizer.ggml.tokens"].is_array())
      fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.tokens must be an array", path);
    tokenizer_json = spm_tokenizer_json_from_gguf(md, path);
    config = tokenizer_config_from_gguf(md, path);
    return;
  }
  if (model != "gpt2")
    fail(ErrorKind::kUnsupported, "{}: tokenizer.ggml.model '{}' is not supported (supported: gpt2, llama, gemma4)", path,
         model.get<std::string>());
  const std::string pre = md.contains("tokenizer.ggml.pre") && md["tokenizer.ggml.pre"].is_string()
                              ? md["tokenizer.ggml.pre"].get<std::string>() : "default";
  const PreTokenizerForm* form = nullptr;
  for (const PreTokenizerForm& f : pre_tokenizer_forms())
    if (pre == f.pre || (pre == "default" && std::string(f.pre) == "gpt-2")) form = &f;
  if (!form)
    fail(ErrorKind::kUnsupported, "{}: tokenizer.ggml.pre '{}' is not supported (supported: qwen2, qwen35, "
         "llama-bpe, deepseek-v3, gpt-2)", path, pre);
  const nlohmann::json& tokens = require(md, "tokenizer.ggml.tokens", path);
  const nlohmann::json& merges = require(md, "tokenizer.ggml.merges", path);
  if (!tokens.is_array() || !merges.is_array())
    fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.tokens and tokenizer.ggml.merges must be arrays", path);
  const nlohmann::json types =
      md.contains("tokenizer.ggml.token_type") ? md["tokenizer.ggml.token_type"] : nlohmann::json::array();
  if (!types.is_array() || (!types.empty() && types.size() != tokens.size()))
    fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.token_type has {} entries for {} tokens", path, types.size(),
         tokens.size());

  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].is_string()) fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.tokens[{}] is not a string", path, i);
    if (!types.empty() && !types[i].is_number_integer())
      fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.token_type[{}] is not an integer", path, i);
    const int type = types.empty() ? kTokenNormal : types[i].get<int>();
    const std::string& text = tokens[i].get_ref<const std::string&>();
    if (type == kTokenControl || type == kTokenUserDefined) {
      added.push_back({{"id", i}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == kTokenControl}});
    } else if (type != kTokenUnused) {
      vocab[text] = i;
    }
  }
  nlohmann::json tj;
  tj["version"] = "1.0";
  tj["added_tokens"] = added;
  tj["normalizer"] = form->normalizer[0] ? nlohmann::json{{"type", form->normalizer}} : nlohmann::json();
  if (form->regexes.empty()) {
    tj["pre_tokenizer"] = byte_level(true);
  } else {
    nlohmann::json steps = nlohmann::json::array();
    for (const std::string& regex : form->regexes)
      steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
    steps.push_back(byte_level(false));
    tj["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
  }
  tj["post_processor"] = nullptr;
  tj["decoder"] = byte_level(false);
  tj["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"byte_fallback", false},
                 {"ignore_merges", pre == "llama-bpe"}, {"vocab", vocab}, {"merges", merges}};
  tokenizer_json = tj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);

  config = tokenizer_config_from_gguf(md, path);
}

nlohmann::json tokenizer_config_from_gguf(const nlohmann::json& md, const std::string& path) {
  nlohmann::json config = nlohmann::json::object();
  const nlohmann::json& tokens = require(md, "tokenizer.ggml.tokens", path);
  auto token_at = [&](const char* key) -> std::string {
    if (!md.contains(key) || !md[key].is_number_integer()) return "";
    const int64_t id = md[key].get<int64_t>();
    return id >= 0 && static_cast<size_t>(id) < tokens.size() && tokens[id].is_string() ? tokens[id].get<std::string>()
                                                                                          : "";
  };
  if (auto t = token_at("tokenizer.ggml.bos_token_id"); !t.empty()) config["bos_token"] = t;
  if (auto t = token_at("tokenizer.ggml.eos_token_id"); !t.empty()) config["eos_token"] = t;
  if (auto t = token_at("tokenizer.ggml.padding_token_id"); !t.empty()) config["pad_token"] = t;
  for (const char* key : {"add_bos_token", "add_eos_token"}) {
    const std::string full = std::string("tokenizer.ggml.") + key;
    config[key] = md.contains(full) && md[full].is_boolean() && md[full].get<bool>();
  }
  if (md.contains("tokenizer.chat_template") && md["tokenizer.chat_template"].is_string())
    config["chat_template"] = md["tokenizer.chat_template"];
  return config;
}

}  // namespace nextn
