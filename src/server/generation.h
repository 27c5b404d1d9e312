// server/generation.h — one in-flight generation seen from an HTTP handler.
// Bridges the engine's callbacks (engine thread) to the handler thread: tokens
// are detokenized incrementally, stop strings are matched across token
// boundaries (the stop text is never emitted and generation is cancelled at once),
// and the handler collects text/logprob updates until the request is done. A
// handler that loses its client calls cancel(); the engine's next callback then
// returns false, so the sequence stops within one step.
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

struct GenerationUpdate {
  std::string text;                  // new text since the last update
  std::vector<TokenEvent> tokens;    // new tokens (filled only when logprobs were requested)
  std::vector<std::string> token_texts;  // their decoded pieces
  bool done = false;
  FinishReason finish = FinishReason::kNone;
  bool stopped_by_string = false;
  Timings timings;
  std::string error;
  int completion_tokens = 0;         // total so far
};

struct GenerationSpec {
  GenerationRequest request;         // prompt, sampling, limits (callbacks are set here)
  std::vector<std::string> stop;
  bool want_token_texts = false;     // logprobs
  bool ignore_eos = false;
};

class Generation {
 public:
  // Submits to the backend; throws nextn::Error from submit (queue full, ...).
  static std::shared_ptr<Generation> start(Backend& backend, GenerationSpec spec);

  // Waits up to timeout_s for news; moves it into `update` (text is consumed).
  // Returns true when there was news or the generation is done.
  bool wait(GenerationUpdate& update, double timeout_s);
  void cancel();
  uint64_t id() const { return id_; }
  int prompt_tokens() const { return n_prompt_; }

 private:
  Generation(Backend& backend, const std::vector<std::string>& stops);
  bool on_token(const TokenEvent& ev);
  void on_done(FinishReason reason, const Timings& timings, const std::string& error);

  Backend& backend_;
  std::unique_ptr<TextDecoder> decoder_;
  std::vector<int32_t> eos_;
  bool want_token_texts_ = false;
  uint64_t id_ = 0;
  int n_prompt_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  GenerationUpdate pending_;
  bool cancelled_ = false;
  bool stop_hit_ = false;
  bool news_ = false;
};

// Resident and peak resident memory of this process (bytes), from /proc/self/status.
struct ProcessMemory {
  size_t rss = 0, peak_rss = 0;
};
ProcessMemory process_memory();

}  // namespace nextn::server
