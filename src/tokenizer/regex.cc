// tokenizer/regex.cc — PCRE2 matching with a per-thread JIT stack and match data.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "util/error.h"

namespace nextn {

namespace {
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(32, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};
ThreadMatchState& match_state() {
  thread_local ThreadMatchState state;
  return state;
}
}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : where_(where) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    fail(ErrorKind::kBadInput, "{}: bad regex at offset {}: {}", where, error_offset,
         reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto& state = match_state();
  auto* code = static_cast<pcre2_code*>(code_);
  PCRE2_SIZE start = 0;
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (start <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      fail(ErrorKind::kInternal, "{}: regex match failed: {}", where_, reinterpret_cast<const char*>(message));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step one code point forward.
      if (b >= text.size()) break;
      start = b + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
  return out;
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

Pattern Pattern::regex(const std::string& r, const std::string& where) {
  Pattern p;
  p.regex_ = std::make_shared<Regex>(r, where);
  return p;
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal_.empty()) return out;
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
    out.emplace_back(pos, pos + literal_.size());
    pos += literal_.size();
  }
  return out;
}

std::string Pattern::replace_all(std::string_view text, std::string_view with) const {
  auto matches = find_all(text);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t prev = 0;
  for (auto [b, e] : matches) {
    out.append(text.substr(prev, b - prev));
    out.append(with);
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace nextn
