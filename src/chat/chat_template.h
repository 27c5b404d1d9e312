// chat/chat_template.h — renders a model's chat template the way transformers'
// apply_chat_template(tokenize=False) does.
//
//   auto t = ChatTemplate::from_model_dir(dir);   // tokenizer_config.json "chat_template"
//                                                 // (string, or list of {name, template}:
//                                                 // "default", or "tool_use" when tools are
//                                                 // given), else chat_template.jinja
//   std::string prompt = t.render(messages, tools, /*add_generation_prompt=*/true,
//                                 {{"enable_thinking", false}});
//
// Variables passed to the template: messages, tools (None when null), documents (None),
// add_generation_prompt, bos_token, eos_token (and the other *_token entries of
// tokenizer_config.json), plus every key of extra_kwargs. Use nlohmann::ordered_json to
// keep the key order of tool schemas and arguments (tojson prints keys in that order,
// like Python); the nlohmann::json overload orders keys alphabetically.
// Errors (syntax, runtime, raise_exception) are nextn::Error "chat template: line L,
// column C: message".
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_limits.h"

namespace nextn {

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // Loads the template and special tokens from a model directory. kNotFound when the
  // directory has no chat template.
  static ChatTemplate from_model_dir(const std::string& dir);
  // A template from source; special_tokens maps names like "bos_token" to their text.
  ChatTemplate(const std::string& source, const nlohmann::ordered_json& special_tokens);
  // Template with a tool-use variant (tokenizer_config.json lists of named templates).
  ChatTemplate(const std::string& source, const std::string& tool_use_source,
               const nlohmann::ordered_json& special_tokens);

  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                     const jinja::RenderLimits& limits = {}) const;
  std::string render(const nlohmann::json& messages, const nlohmann::json& tools, bool add_generation_prompt,
                     const nlohmann::json& extra_kwargs, const jinja::RenderLimits& limits = {}) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> template_, tool_template_;
  nlohmann::ordered_json special_tokens_;
};

}  // namespace nextn
