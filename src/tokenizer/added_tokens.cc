// tokenizer/added_tokens.cc — added-token matching and splitting.
#include "tokenizer/added_tokens.h"

#include "tokenizer/utf8.h"

namespace nextn {

void AddedTokens::add(AddedToken token) {
  if (token.content.empty()) return;
  auto existing = by_content_.find(token.content);
  size_t index;
  if (existing != by_content_.end()) {
    index = existing->second;
    tokens_[index] = token;
  } else {
    index = tokens_.size();
    tokens_.push_back(token);
    by_content_[token.content] = index;
  }
  by_id_[token.id] = index;
  int32_t node = 0;
  for (unsigned char c : token.content) {
    uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
    auto it = edges_.find(key);
    if (it == edges_.end()) {
      int32_t child = static_cast<int32_t>(terminal_.size());
      terminal_.push_back(-1);
      edges_.emplace(key, child);
      node = child;
    } else {
      node = it->second;
    }
  }
  terminal_[node] = static_cast<int32_t>(index);
  first_byte_[static_cast<unsigned char>(token.content[0])] = true;
}

const AddedToken* AddedTokens::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::find_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

int AddedTokens::longest_match(std::string_view text, size_t pos) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == edges_.end()) break;
    node = it->second;
    if (terminal_[node] >= 0) best = terminal_[node];
  }
  return best;
}

namespace {
bool is_word_char_before(std::string_view text, size_t pos) {
  if (pos == 0) return false;
  size_t i = pos - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  size_t j = i;
  char32_t c = utf8::next(text, j);
  return c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : true);
}
bool is_word_char_at(std::string_view text, size_t pos) {
  if (pos >= text.size()) return false;
  size_t j = pos;
  char32_t c = utf8::next(text, j);
  return c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : true);
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
}  // namespace

std::vector<AddedTokens::Segment> AddedTokens::split(std::string_view text) const {
  std::vector<Segment> out;
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return out;
  }
  size_t seg_start = 0, pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    int m = longest_match(text, pos);
    if (m < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[m];
    size_t end = pos + t.content.size();
    if (t.single_word && (is_word_char_before(text, pos) || is_word_char_at(text, end))) {
      ++pos;
      continue;
    }
    size_t text_end = pos;
    if (t.lstrip)
      while (text_end > seg_start && is_space(text[text_end - 1])) --text_end;
    if (text_end > seg_start) out.push_back({text.substr(seg_start, text_end - seg_start), -1});
    out.push_back({{}, t.id});
    if (t.rstrip)
      while (end < text.size() && is_space(text[end])) ++end;
    pos = seg_start = end;
  }
  if (seg_start < text.size()) out.push_back({text.substr(seg_start), -1});
  return out;
}

}  // namespace nextn
