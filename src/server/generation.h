// server/generation.h — one in-flight generation seen from an HTTP handler.
// Bridges the engine's callbacks (engine thread) to the handler thread. The engine
// callback only queues the token; the handler thread detokenizes it when it collects
// the update, so engine steps never wait on text work. The exception is a request with
// stop strings: its tokens are detokenized in the callback, because a stop string must
// end the generation (finish reason `stop`) before the engine runs another step, and
// the stop text is never emitted. A handler that loses its client calls cancel(); the
// engine's next callback then ends the sequence within one step.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/backend.h"

namespace nextn::server {

// Holds back the text that might be the start of a stop string (for backends
// whose detokenizer has no stop-string support, e.g. the test fake).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Returns the text that is safe to emit; sets `hit` when a stop string
  // completed (the text before it is returned, the rest dropped).
  std::string feed(const std::string& text, bool& hit);
  std::string flush();  // end of generation: release held text

 private:
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string pending_;
};

// One emitted token as the token_sources stream reports it: how its step made it and
// the text it released from the detokenizer (possibly none: a partial UTF-8 sequence
// or text held back for stop strings comes out with a later token).
struct TokenPiece {
  TokenSource source = TokenSource::kTarget;
  int position = 1;   // see TokenEvent
  int drafts = 0;
  std::string text;
  bool is_token = true;  // false: text released at the end of the generation, no token
};

struct GenerationUpdate {
  std::string text;                  // new text since the last update
  std::vector<TokenEvent> tokens;    // new tokens (filled only when logprobs were requested)
  std::vector<std::string> token_texts;  // their decoded pieces
  std::vector<std::vector<std::string>> top_texts;  // the pieces of their top_logprobs alternatives
  std::vector<TokenPiece> pieces;    // new tokens with their provenance (only when asked for); texts add up to text
  bool done = false;
  FinishReason finish = FinishReason::kNone;
  Timings timings;
  std::string error;
  int completion_tokens = 0;         // total so far
};

// What to generate: the engine request (prompt, sampling, limits; Generation sets
// its callbacks) plus what the HTTP layer adds on top.
struct GenerationJob {
  GenerationRequest request;
  std::vector<std::string> stop;     // stop strings
  bool want_token_texts = false;     // logprobs: the text of every token
  bool want_token_sources = false;   // the provenance and released text of every token
  bool ignore_eos = false;           // end-of-turn tokens do not end the generation
};

class Generation {
 public:
  // Submits to the backend; throws nextn::Error from submit (queue full, ...).
  static std::shared_ptr<Generation> start(Backend& backend, GenerationJob job);

  // Waits up to timeout_s for news; moves it into `update` (text is consumed).
  // Returns true when there was news or the generation is done.
  bool wait(GenerationUpdate& update, double timeout_s);
  void cancel();
  uint64_t id() const { return id_; }
  int prompt_tokens() const { return n_prompt_; }

 private:
  Generation(Backend& backend, const std::vector<std::string>& stops);
  TokenReply on_token(const TokenEvent& ev);
  void on_done(FinishReason reason, const Timings& timings, const std::string& error);
  // Detokenizes one token into `into` (notes a stop string).
  void decode(const TokenEvent& ev, GenerationUpdate& into);

  Backend& backend_;
  std::unique_ptr<TextDecoder> decoder_;
  bool decode_in_callback_ = false;  // the request has stop strings
  bool want_token_texts_ = false;
  bool want_token_sources_ = false;
  uint64_t id_ = 0;
  int n_prompt_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenEvent> queued_;   // emitted, not yet detokenized
  GenerationUpdate pending_;
  bool cancelled_ = false;
  bool stop_hit_ = false;
  bool flushed_ = false;             // the decoder's held-back text was released (handler thread)
  bool news_ = false;
};

}  // namespace nextn::server
