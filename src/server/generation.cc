// server/generation.cc — engine callbacks → detokenized, stop-checked updates.
#include "server/generation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "util/log.h"

namespace nextn::server {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

std::string StopMatcher::feed(const std::string& text, bool& hit) {
  hit = false;
  if (stops_.empty()) return text;
  pending_ += text;
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    hit = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Keep the longest suffix that is a prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    size_t max_l = std::min(pending_.size(), s.size() - 1);
    for (size_t l = max_l; l > hold; --l)
      if (pending_.compare(pending_.size() - l, l, s, 0, l) == 0) {
        hold = l;
        break;
      }
  }
  // Never split a UTF-8 sequence when releasing.
  size_t cut = pending_.size() - hold;
  while (cut > 0 && cut < pending_.size() && (uint8_t(pending_[cut]) & 0xC0) == 0x80) --cut;
  std::string out = pending_.substr(0, cut);
  pending_.erase(0, cut);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

Generation::Generation(Backend& backend, const std::vector<std::string>& stops)
    : backend_(backend), decoder_(backend.new_decoder(stops)) {}

std::shared_ptr<Generation> Generation::start(Backend& backend, GenerationSpec spec) {
  std::shared_ptr<Generation> g(new Generation(backend, spec.stop));
  g->want_token_texts_ = spec.want_token_texts;
  g->eos_ = backend.eos_tokens();
  g->n_prompt_ = int(spec.request.prompt.size());
  GenerationRequest req = std::move(spec.request);
  if (!spec.ignore_eos) req.stop_tokens = g->eos_;
  req.on_token = [g](const TokenEvent& ev) { return g->on_token(ev); };
  req.on_done = [g](FinishReason r, const Timings& t, const std::string& e) { g->on_done(r, t, e); };
  // Hold the lock so that callbacks arriving before id_ is set see a consistent object.
  std::lock_guard<std::mutex> lock(g->mu_);
  g->id_ = backend.submit(std::move(req));
  return g;
}

bool Generation::on_token(const TokenEvent& ev) {
  // Detokenize outside the lock would be nicer, but the decoder is only touched here.
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_ || stop_hit_ || pending_.done) return false;
  pending_.completion_tokens++;
  bool is_eos = std::find(eos_.begin(), eos_.end(), ev.token) != eos_.end();
  std::string piece = is_eos ? std::string() : decoder_->push(ev.token);
  if (want_token_texts_) {
    pending_.tokens.push_back(ev);
    pending_.token_texts.push_back(is_eos ? std::string() : backend_.token_text(ev.token));
  }
  pending_.text += piece;
  bool hit = decoder_->stopped();
  news_ = true;
  if (hit) {
    stop_hit_ = true;
    pending_.stopped_by_string = true;
  }
  cv_.notify_all();
  return !hit;
}

void Generation::on_done(FinishReason reason, const Timings& timings, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stop_hit_) {
    pending_.text += decoder_->finish();
    if (decoder_->stopped()) {
      stop_hit_ = true;
      pending_.stopped_by_string = true;
    }
  }
  pending_.done = true;
  pending_.finish = stop_hit_ ? FinishReason::kStop : reason;
  pending_.timings = timings;
  pending_.error = error;
  news_ = true;
  cv_.notify_all();
}

bool Generation::wait(GenerationUpdate& update, double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return news_; });
  if (!news_) return false;
  update.text = std::move(pending_.text);
  pending_.text.clear();
  update.tokens = std::move(pending_.tokens);
  pending_.tokens.clear();
  update.token_texts = std::move(pending_.token_texts);
  pending_.token_texts.clear();
  update.done = pending_.done;
  update.finish = pending_.finish;
  update.stopped_by_string = pending_.stopped_by_string;
  update.timings = pending_.timings;
  update.error = pending_.error;
  update.completion_tokens = pending_.completion_tokens;
  news_ = false;
  return true;
}

void Generation::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_ || pending_.done) return;
    cancelled_ = true;
  }
  backend_.cancel(id_);
}

ProcessMemory process_memory() {
  ProcessMemory m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kb = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) m.rss = size_t(kb) * 1024;
    if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1) m.peak_rss = size_t(kb) * 1024;
  }
  std::fclose(f);
  return m;
}

}  // namespace nextn::server
