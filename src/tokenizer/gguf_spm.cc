// tokenizer/gguf_spm.cc — SentencePiece-style ("llama") GGUF vocabularies ↔ the
// tokenizer.json Hugging Face converts from the same SentencePiece BPE model (Llama 2,
// Mistral, Gemma): BPE with byte fallback over "▁"-for-space text.
//
// GGUF keeps pieces with scores and types, not merges. Hugging Face's converter
// (SentencePieceExtractor) makes a merge of every split of a piece into two pieces of
// the vocabulary, ordered by the piece's score (highest first; equal scores in id order)
// and, within a piece, by the ids of its two halves. Rebuilding merges by that rule gives
// the converted tokenizer.json's merges exactly, so tokenizing here equals tokenizing with
// it. The other direction gives each piece the score −(rank of the first merge that
// makes it), which that rule turns back into the same merges.
#include "tokenizer/gguf_spm.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "util/error.h"

namespace nextn {
namespace {

const char* const kSpace = "\xe2\x96\x81";  // ▁, SentencePiece's space

bool is_byte_piece(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
         std::isxdigit(static_cast<unsigned char>(t[4]));
}

// Byte offsets of the code point boundaries inside t (excluding 0 and t.size()).
std::vector<size_t> split_points(const std::string& t) {
  std::vector<size_t> out;
  size_t i = 0;
  while (i < t.size()) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    i += len;
    if (i < t.size()) out.push_back(i);
  }
  return out;
}

}  // namespace

bool is_spm_tokenizer_json(const nlohmann::json& tj) {
  const nlohmann::json& model = tj.at("model");
  return model.value("type", "BPE") == "BPE" && model.value("byte_fallback", false);
}

GgufVocab spm_vocab_from_tokenizer_json(const nlohmann::json& tj, int vocab_size, const std::string& what) {
  GgufVocab v;
  v.model = "llama";
  v.pre = "default";
  const nlohmann::json& model = tj.at("model");
  int max_id = vocab_size - 1;
  for (const auto& [tok, id] : model.at("vocab").items()) max_id = std::max(max_id, id.get<int>());
  for (const auto& a : tj.value("added_tokens", nlohmann::json::array())) max_id = std::max(max_id, a.at("id").get<int>());
  const size_t n = static_cast<size_t>(max_id + 1);
  v.tokens.assign(n, "");
  v.token_types.assign(n, kTokenUnused);
  v.scores.assign(n, 0.0f);
  const std::string unk = model.contains("unk_token") && model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
  for (const auto& [tok, id] : model.at("vocab").items()) {
    const size_t i = id.get<size_t>();
    v.tokens[i] = tok;
    v.token_types[i] = tok == unk ? kTokenUnknown : is_byte_piece(tok) ? kTokenByte : kTokenNormal;
  }
  for (const auto& a : tj.value("added_tokens", nlohmann::json::array())) {
    const size_t id = a.at("id").get<size_t>();
    v.tokens[id] = a.at("content").get<std::string>();
    if (v.tokens[id] != unk) v.token_types[id] = a.value("special", false) ? kTokenControl : kTokenUserDefined;
  }
  for (size_t i = 0; i < n; ++i)
    if (v.tokens[i].empty()) v.tokens[i] = "[PAD" + std::to_string(i) + "]";
  // Score = −(rank of the first merge producing the piece); pieces no merge makes keep
  // the lowest score (they have no two-piece split, or it never applies).
  std::unordered_map<std::string, size_t> id_of;
  for (size_t i = 0; i < n; ++i) id_of.emplace(v.tokens[i], i);
  std::vector<bool> scored(n, false);
  const nlohmann::json& merges = model.at("merges");
  const float lowest = -static_cast<float>(merges.size()) - 1.0f;
  std::fill(v.scores.begin(), v.scores.end(), lowest);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const nlohmann::json& m = merges[rank];
    std::string piece;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) fail(ErrorKind::kBadInput, "{}: merge {} has no space: '{}'", what, rank, s);
      piece = s.substr(0, sp) + s.substr(sp + 1);
    } else {
      piece = m.at(0).get<std::string>() + m.at(1).get<std::string>();
    }
    v.merges.push_back(m.is_string() ? m.get<std::string>() : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
    auto it = id_of.find(piece);
    if (it == id_of.end()) fail(ErrorKind::kBadInput, "{}: merge {} makes '{}', which is not in the vocabulary", what, rank, piece);
    if (!scored[it->second]) {
      scored[it->second] = true;
      v.scores[it->second] = -static_cast<float>(rank);
    }
  }
  // A normalizer that prepends ▁ (Llama 2) is GGUF's add_space_prefix; Gemma's does not.
  const std::string normalizer = tj.value("normalizer", nlohmann::json()).dump();
  v.add_space_prefix = normalizer.find("\"Prepend\"") != std::string::npos;
  return v;
}

std::string spm_tokenizer_json_from_gguf(const nlohmann::json& md, const std::string& path) {
  const nlohmann::json& tokens = md.at("tokenizer.ggml.tokens");
  // "gemma4" (llama.cpp's Gemma 4 vocabulary) stores the merges themselves; "llama" only
  // the pieces' scores, from which the merges are rebuilt below.
  const bool stored_merges = md.value("tokenizer.ggml.model", "") == "gemma4";
  if (stored_merges && (!md.contains("tokenizer.ggml.merges") || !md["tokenizer.ggml.merges"].is_array()))
    fail(ErrorKind::kBadInput, "{}: gemma4 vocabulary without tokenizer.ggml.merges", path);
  if (!stored_merges && (!md.contains("tokenizer.ggml.scores") || !md["tokenizer.ggml.scores"].is_array()))
    fail(ErrorKind::kBadInput, "{}: SentencePiece vocabulary without tokenizer.ggml.scores", path);
  const nlohmann::json* scores = stored_merges ? nullptr : &md.at("tokenizer.ggml.scores");
  const nlohmann::json types =
      md.contains("tokenizer.ggml.token_type") ? md["tokenizer.ggml.token_type"] : nlohmann::json::array();
  const bool types_fit = types.empty() || types.size() == tokens.size();
  if (scores && (scores->size() != tokens.size() || !types_fit))
    fail(ErrorKind::kBadInput, "{}: {} tokens but {} scores and {} token types", path, tokens.size(), scores->size(),
         types.size());
  if (!types_fit) fail(ErrorKind::kBadInput, "{}: {} tokens but {} token types", path, tokens.size(), types.size());
  const size_t n = tokens.size();
  std::unordered_map<std::string, size_t> id_of;
  id_of.reserve(n);
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  std::string unk;
  std::vector<float> score(n);
  for (size_t i = 0; i < n; ++i) {
    if (!tokens[i].is_string()) fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.tokens[{}] is not a string", path, i);
    if (scores && !(*scores)[i].is_number())
      fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.scores[{}] is not a number", path, i);
    if (!types.empty() && !types[i].is_number_integer())
      fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.token_type[{}] is not an integer", path, i);
    const std::string& text = tokens[i].get_ref<const std::string&>();
    const int type = types.empty() ? kTokenNormal : types[i].get<int>();
    if (scores) score[i] = (*scores)[i].get<float>();
    if (id_of.emplace(text, i).second) vocab[text] = i;  // a repeated text keeps its first id
    if (type == kTokenUnknown && unk.empty()) unk = text;
    // The unknown piece is matched in text like a control token, as Hugging Face's
    // converted tokenizers list "<unk>" among their special added tokens.
    if (type == kTokenControl || type == kTokenUserDefined || type == kTokenUnknown)
      added.push_back({{"id", i}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type != kTokenUserDefined}});
  }
  if (md.contains("tokenizer.ggml.unknown_token_id") && md["tokenizer.ggml.unknown_token_id"].is_number_integer()) {
    const int64_t id = md["tokenizer.ggml.unknown_token_id"].get<int64_t>();
    if (id >= 0 && static_cast<size_t>(id) < n) unk = tokens[id].get<std::string>();
  }

  struct Merge {
    float score;
    size_t piece, left, right;
    size_t cut;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < n && !stored_merges; ++i) {
    const std::string& t = tokens[i].get_ref<const std::string&>();
    for (size_t cut : split_points(t)) {
      auto l = id_of.find(t.substr(0, cut));
      if (l == id_of.end()) continue;
      auto r = id_of.find(t.substr(cut));
      if (r == id_of.end()) continue;
      merges.push_back({score[i], i, l->second, r->second, cut});
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.piece != b.piece) return a.piece < b.piece;
    if (a.left != b.left) return a.left < b.left;
    return a.right < b.right;
  });
  nlohmann::json merge_list = nlohmann::json::array();
  for (const Merge& m : merges) {
    const std::string& t = tokens[m.piece].get_ref<const std::string&>();
    merge_list.push_back(nlohmann::json::array({t.substr(0, m.cut), t.substr(m.cut)}));
  }
  if (stored_merges) {
    // "left right": the pieces hold ▁ for spaces, so the first space after the first
    // character splits the pair.
    const nlohmann::json& stored = md["tokenizer.ggml.merges"];
    for (size_t i = 0; i < stored.size(); ++i) {
      const size_t sp = stored[i].is_string() ? stored[i].get_ref<const std::string&>().find(' ', 1) : std::string::npos;
      if (sp == std::string::npos)
        fail(ErrorKind::kBadInput, "{}: tokenizer.ggml.merges[{}] is not a string 'left right'", path, i);
      const std::string& m = stored[i].get_ref<const std::string&>();
      merge_list.push_back(nlohmann::json::array({m.substr(0, sp), m.substr(sp + 1)}));
    }
  }

  // llama.cpp's default: true for "llama", false for "gemma4" (its converter writes false)
  const bool prefix = md.contains("tokenizer.ggml.add_space_prefix")
                          ? md["tokenizer.ggml.add_space_prefix"].is_boolean() &&
                                md["tokenizer.ggml.add_space_prefix"].get<bool>()
                          : !stored_merges;
  nlohmann::json steps = nlohmann::json::array();
  if (prefix) steps.push_back({{"type", "Prepend"}, {"prepend", kSpace}});
  steps.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}});
  nlohmann::json decoders = nlohmann::json::array(
      {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}}, {{"type", "ByteFallback"}},
       {{"type", "Fuse"}}});
  if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});

  nlohmann::json tj;
  tj["version"] = "1.0";
  tj["added_tokens"] = added;
  tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
  tj["pre_tokenizer"] = nullptr;
  tj["post_processor"] = nullptr;
  tj["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  tj["model"] = {{"type", "BPE"},        {"dropout", nullptr},  {"unk_token", unk.empty() ? nlohmann::json() : nlohmann::json(unk)},
                 {"fuse_unk", true},     {"byte_fallback", true}, {"ignore_merges", false},
                 {"vocab", vocab},       {"merges", merge_list}};
  return tj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace nextn
