// server/generation.cc — engine callbacks → queued tokens → detokenized, stop-checked updates.
#include "server/generation.h"

#include <algorithm>
#include <chrono>

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
    : backend_(backend), decoder_(backend.new_decoder(stops)), decode_in_callback_(!stops.empty()) {}

std::shared_ptr<Generation> Generation::start(Backend& backend, GenerationJob job) {
  std::shared_ptr<Generation> g(new Generation(backend, job.stop));
  g->want_token_texts_ = job.want_token_texts;
  g->want_token_sources_ = job.want_token_sources;
  g->n_prompt_ = int(job.request.prompt.size());
  GenerationRequest req = std::move(job.request);
  // End-of-turn tokens end the generation in the engine and are never emitted; with
  // ignore_eos they are ordinary tokens.
  if (!job.ignore_eos) req.stop_tokens = backend.eos_tokens();
  req.on_token = [g](const TokenEvent& ev) { return g->on_token(ev); };
  req.on_done = [g](FinishReason r, const Timings& t, const std::string& e) { g->on_done(r, t, e); };
  // Hold the lock so that callbacks arriving before id_ is set see a consistent object.
  std::lock_guard<std::mutex> lock(g->mu_);
  g->id_ = backend.submit(std::move(req));
  return g;
}

TokenReply Generation::on_token(const TokenEvent& ev) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_ || stop_hit_ || pending_.done) return false;
  pending_.completion_tokens++;
  if (decode_in_callback_) {
    decode(ev, pending_);
  } else {
    queued_.push_back(ev);
  }
  news_ = true;
  cv_.notify_all();
  return stop_hit_ ? TokenReply::stop() : TokenReply(true);
}

void Generation::decode(const TokenEvent& ev, GenerationUpdate& into) {
  std::string text = decoder_->push(ev.token);
  if (want_token_sources_) into.pieces.push_back({ev.source, ev.position, ev.drafts, text});
  into.text += text;
  if (want_token_texts_) into.tokens.push_back(ev);
  if (decoder_->stopped()) stop_hit_ = true;
}

void Generation::on_done(FinishReason reason, const Timings& timings, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.done = true;
  pending_.finish = reason;
  pending_.timings = timings;
  pending_.error = error;
  news_ = true;
  cv_.notify_all();
}

bool Generation::wait(GenerationUpdate& update, double timeout_s) {
  std::vector<TokenEvent> queued;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return news_; });
    if (!news_) return false;
    queued.swap(queued_);
    update.text = std::move(pending_.text);
    pending_.text.clear();
    update.tokens = std::move(pending_.tokens);
    pending_.tokens.clear();
    update.pieces = std::move(pending_.pieces);
    pending_.pieces.clear();
    update.done = pending_.done;
    update.finish = pending_.finish;
    update.timings = pending_.timings;
    update.error = pending_.error;
    update.completion_tokens = pending_.completion_tokens;
    news_ = false;
  }
  // Text work happens here, on the handler thread, outside the lock. Without stop
  // strings only this thread touches the decoder; with them the engine thread has
  // decoded every token already (queued is empty) and is done with the decoder once
  // update.done is seen.
  for (const TokenEvent& ev : queued) decode(ev, update);
  if (update.done && !flushed_) {
    flushed_ = true;
    if (!stop_hit_) {
      std::string rest = decoder_->finish();
      update.text += rest;
      if (want_token_sources_ && !rest.empty()) {
        TokenPiece end;
        end.text = rest;
        end.is_token = false;
        update.pieces.push_back(std::move(end));
      }
      // The held-back text completed a stop string only now: the answer ended at it.
      if (decoder_->stopped()) update.finish = FinishReason::kStop;
    }
  }
  update.token_texts.clear();
  update.top_texts.clear();
  for (const TokenEvent& t : update.tokens) {
    update.token_texts.push_back(backend_.token_text(t.token));
    std::vector<std::string> alternatives;
    for (const auto& a : t.top) alternatives.push_back(backend_.token_text(a.token));
    update.top_texts.push_back(std::move(alternatives));
  }
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

}  // namespace nextn::server
