// server/engine_backend.cc — Backend over the real Engine, Tokenizer,
// StreamDecoder (stop strings) and the checkpoint's chat template.
#include <algorithm>
#include <memory>
#include <mutex>

#include "chat/chat_template.h"
#include "server/backend.h"
#include "tokenizer/end_tokens.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"

namespace nextn::server {

namespace {

class StreamTextDecoder : public TextDecoder {
 public:
  StreamTextDecoder(const Tokenizer& tok, const std::vector<std::string>& stops) : dec_(tok, true, stops) {}
  std::string push(int32_t token) override { return dec_.push(token); }
  std::string finish() override { return dec_.flush(); }
  bool stopped() const override { return dec_.stopped(); }

 private:
  StreamDecoder dec_;
};

class EngineBackend : public Backend {
 public:
  EngineBackend(const EngineOptions& options, const std::string& model_id) {
    tokenizer_ = Tokenizer::load(options.model_dir);
    engine_ = std::make_unique<Engine>(options);
    const ModelConfig& cfg = engine_->model().config();
    const EngineOptions& eo = engine_->options();
    info_.id = model_id;
    info_.path = eo.model_dir;
    info_.architecture = cfg.architecture;
    info_.n_ctx = eo.ctx_size;
    info_.n_ctx_train = cfg.max_position_embeddings;
    info_.vocab_size = cfg.vocab_size;
    info_.head_dim = cfg.head_dim > 0 ? cfg.head_dim : (cfg.num_heads > 0 ? cfg.hidden_size / cfg.num_heads : 0);
    info_.parallel = eo.parallel;
    info_.queue_size = eo.queue_size;
    info_.weight_bytes = engine_->model().weight_bytes();
    info_.kv_type = kv_type_name(eo.kv.type);
    info_.kv = eo.kv;
    info_.speculative = eo.speculative.mode;
    info_.num_draft_tokens = eo.speculative.mode == "none" ? 0 : eo.speculative.num_draft_tokens;
    info_.vision = engine_->vision_encoder();
    // Completions end at end-of-turn tokens too: a prompt may well be a chat transcript.
    eos_ = end_of_generation_tokens(*tokenizer_, cfg.eos_token_ids, true);
    try {
      template_ = std::make_unique<ChatTemplate>(ChatTemplate::from_model_dir(options.model_dir));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNotFound) throw;
      log_warn("{}: no chat template; /v1/chat/completions is unavailable ({})", options.model_dir, e.what());
    }
  }

  const ModelInfo& info() const override { return info_; }

  std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool parse_special) const override {
    (void)parse_special;  // added tokens are always recognised by the tokenizer
    return tokenizer_->encode(text, add_special);
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override { return tokenizer_->decode(ids, false); }
  std::string token_text(int32_t id) const override {
    return tokenizer_->decode(std::span<const int32_t>(&id, 1), false);
  }
  std::unique_ptr<TextDecoder> new_decoder(const std::vector<std::string>& stops) const override {
    return std::make_unique<StreamTextDecoder>(*tokenizer_, stops);
  }
  std::string apply_chat_template(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                  bool add_generation_prompt, const nlohmann::ordered_json& kwargs,
                                  const jinja::RenderLimits& limits) const override {
    if (!template_)
      fail(ErrorKind::kUnsupported, "the model has no chat template (tokenizer_config.json); use /v1/completions");
    return template_->render(messages, tools, add_generation_prompt, kwargs, limits);
  }
  std::vector<int32_t> eos_tokens() const override { return eos_; }
  grammar::GrammarCache* grammar_cache() const override {
    std::call_once(grammar_once_, [&] {
      grammars_ = std::make_unique<grammar::GrammarCache>(
          std::make_shared<grammar::TokenTrie>(vocabulary_bytes(*tokenizer_, info_.vocab_size)));
    });
    return grammars_.get();
  }

  uint64_t submit(GenerationRequest request) override { return engine_->submit(std::move(request)); }
  void cancel(uint64_t id) override { engine_->cancel(id); }
  EngineStats stats() const override { return engine_->stats(); }
  void shutdown() override { engine_->shutdown(); }

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ChatTemplate> template_;
  ModelInfo info_;
  std::vector<int32_t> eos_;
  mutable std::once_flag grammar_once_;
  mutable std::unique_ptr<grammar::GrammarCache> grammars_;
};

}  // namespace

std::unique_ptr<Backend> make_engine_backend(const EngineOptions& options, const std::string& model_id) {
  return std::make_unique<EngineBackend>(options, model_id);
}

}  // namespace nextn::server
