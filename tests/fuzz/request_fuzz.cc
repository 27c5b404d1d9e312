// tests/fuzz/request_fuzz.cc — any HTTP request body sent to /v1/chat/completions or
// /v1/completions is parsed into a request and turned into a generation job (against a
// small stand-in model: byte tokens, a plain chat format) or refused with the 4xx error
// the server would send (ApiError, nextn::Error, a JSON error); never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/api_error.h"
#include "server/generation_job.h"
#include "server/json_fields.h"
#include "server/request.h"
#include "util/error.h"

namespace {

// Just enough of a model for prepare_generation: tokens are bytes.
class StandIn final : public nextn::server::Backend {
 public:
  StandIn() {
    info_.id = "stand-in";
    info_.n_ctx = 4096;
    info_.vocab_size = 256;
    info_.head_dim = 64;
  }
  const nextn::server::ModelInfo& info() const override { return info_; }
  std::vector<int32_t> tokenize(const std::string& text, bool, bool) const override {
    return std::vector<int32_t>(text.begin(), text.end());
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override { return std::string(ids.begin(), ids.end()); }
  std::string token_text(int32_t id) const override { return std::string(1, char(id)); }
  std::unique_ptr<nextn::server::TextDecoder> new_decoder(const std::vector<std::string>&) const override {
    return nullptr;
  }
  std::string apply_chat_template(const nlohmann::ordered_json& messages, const nlohmann::ordered_json&, bool,
                                  const nlohmann::ordered_json&, const nextn::jinja::RenderLimits&) const override {
    std::string out;
    for (const auto& m : messages) out += m.dump() + "\n";
    return out;
  }
  std::vector<int32_t> eos_tokens() const override { return {0}; }
  uint64_t submit(nextn::GenerationRequest) override { return 0; }
  void cancel(uint64_t) override {}
  nextn::EngineStats stats() const override { return {}; }
  void shutdown() override {}

 private:
  nextn::server::ModelInfo info_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static StandIn backend;
  static const nextn::server::RequestDefaults defaults;
  std::string body(reinterpret_cast<const char*>(data), size);
  for (bool chat : {true, false}) {
    try {
      nlohmann::ordered_json json = nextn::server::parse_body(body, 64);
      nextn::server::ParsedRequest r = chat ? nextn::server::parse_chat_request(json, defaults)
                                            : nextn::server::parse_completion_request(json, defaults);
      nextn::server::prepare_generation(backend, std::move(r), defaults.max_tokens, {});
    } catch (const nextn::server::ApiError&) {
    } catch (const nextn::Error&) {
    } catch (const nlohmann::json::exception&) {  // the server answers these with 400 too
    }
  }
  return 0;
}
