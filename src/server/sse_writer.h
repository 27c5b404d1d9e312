// server/sse_writer.h — the streamed answer of one generation as Server-Sent Events,
// one provider call at a time: the role chunk (or the completions echo), a chunk per
// update (content, reasoning_content, logprobs), the tool calls, the finish chunk with
// timings, the usage chunk when asked for, then [DONE]. While the engine is busy it
// writes keep-alive comments, which also find clients that have gone; a failed write
// cancels the generation.
#pragma once
#include <functional>
#include <memory>

#include "server/generation_job.h"
#include "server/output_parser.h"
#include "server/responses.h"

namespace httplib {
class DataSink;
}

namespace nextn::server {

class SseWriter {
 public:
  struct Hooks {
    std::function<void(const GenerationUpdate&)> finished;  // the last update, once
    std::function<void()> client_gone;                      // a write failed before the end
  };
  SseWriter(std::shared_ptr<Generation> generation, ResponsePlan plan, ResponseIds ids, Hooks hooks);

  // One provider call: waits up to a few seconds for news and writes it. Returns
  // false when the response must end at once (the client is gone).
  bool write_next(httplib::DataSink& sink);
  // The response is over; returns whether the generation ran to its end.
  bool finished() const { return finished_; }

 private:
  nlohmann::ordered_json with_usage_slot(nlohmann::ordered_json chunk) const;
  bool fail_write();
  std::string final_events(const GenerationUpdate& u);

  std::shared_ptr<Generation> gen_;
  ResponsePlan plan_;
  ResponseIds ids_;
  Hooks hooks_;
  OutputParser parser_;
  size_t text_offset_ = 0;  // completions logprobs: bytes of text sent so far
  bool sent_role_ = false;
  bool finished_ = false;
};

}  // namespace nextn::server
