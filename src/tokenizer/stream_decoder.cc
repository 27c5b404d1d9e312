// tokenizer/stream_decoder.cc — windowed incremental decoding + stop-string holding.
#include "tokenizer/stream_decoder.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace nextn {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens, std::vector<std::string> stop_strings)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {
  for (auto& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

namespace {
bool ends_incomplete(const std::string& text) {
  // A trailing U+FFFD may be a byte sequence that later tokens complete.
  return text.size() >= 3 && text.compare(text.size() - 3, 3, utf8::kReplacement) == 0;
}
}  // namespace

std::string StreamDecoder::push(int32_t token) {
  if (stopped_) return "";
  ids_.push_back(token);
  std::string text = tokenizer_.decode(ids_, skip_special_);
  if (ends_incomplete(text) || text.size() <= prefix_text_.size() ||
      text.compare(0, prefix_text_.size(), prefix_text_) != 0)
    return "";  // nothing new yet, or a character still incomplete: wait for more tokens
  std::string fresh = text.substr(prefix_text_.size());
  // The tokens of this emission become the context of the next decode, so decoders that
  // look at neighbours (Metaspace's first-token rule) see the same as a one-shot decode.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_));
  prefix_ = ids_.size();
  prefix_text_ = tokenizer_.decode(ids_, skip_special_);
  return filter_stops(std::move(fresh), false);
}

std::string StreamDecoder::flush() {
  if (stopped_) return "";
  std::string text = tokenizer_.decode(ids_, skip_special_);
  std::string fresh = text.size() >= prefix_text_.size() ? text.substr(prefix_text_.size()) : std::string();
  ids_.clear();
  prefix_ = 0;
  prefix_text_.clear();
  return filter_stops(std::move(fresh), true);
}

std::string StreamDecoder::filter_stops(std::string fresh, bool final) {
  if (stops_.empty()) return fresh;
  held_ += fresh;
  // Earliest complete stop string.
  size_t best = std::string::npos;
  for (auto& s : stops_) {
    size_t p = held_.find(s);
    if (p < best) {
      best = p;
      matched_stop_ = s;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  if (final) {
    std::string out = std::move(held_);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (auto& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace nextn
