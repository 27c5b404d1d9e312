// chat/chat_template.cc — finding the template in a model directory and rendering it
// with transformers' variables.
#include "chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/jinja.h"
#include "io/gguf.h"
#include "tokenizer/gguf_vocab.h"
#include "util/error.h"
#include "util/file.h"

namespace nextn {

namespace {

std::string token_text(const nlohmann::ordered_json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) return entry["content"].get<std::string>();
  return "";
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, const nlohmann::ordered_json& special_tokens)
    : source_(source), template_(std::make_shared<jinja::Template>(source)), special_tokens_(special_tokens) {}

ChatTemplate::ChatTemplate(const std::string& source, const std::string& tool_use_source,
                           const nlohmann::ordered_json& special_tokens)
    : ChatTemplate(source, special_tokens) {
  if (!tool_use_source.empty()) tool_template_ = std::make_shared<jinja::Template>(tool_use_source);
}

ChatTemplate ChatTemplate::from_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (const std::string gguf = gguf_model_file(dir); !gguf.empty()) {
    // GGUF: tokenizer.chat_template and the special tokens from tokenizer.ggml.*.
    config = nlohmann::ordered_json::parse(tokenizer_config_from_gguf(GgufFile::open(gguf)->metadata(), gguf)
                                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (fs::exists(config_path)) {
    try {
      config = nlohmann::ordered_json::parse(read_file(config_path.string()));
    } catch (const nlohmann::json::exception& e) {
      fail(ErrorKind::kBadInput, "{}: invalid JSON: {}", config_path.string(), e.what());
    }
  }
  nlohmann::ordered_json specials = nlohmann::ordered_json::object();
  for (auto& [key, value] : config.items()) {
    if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0 && (value.is_string() || value.is_object()))
      specials[key] = token_text(value);  // unset (null) tokens are not passed, as in transformers
  }
  std::string source, tool_source;
  const nlohmann::ordered_json* ct = config.contains("chat_template") ? &config["chat_template"] : nullptr;
  if (ct && ct->is_string()) {
    source = ct->get<std::string>();
  } else if (ct && ct->is_array()) {
    // Named templates: [{"name": "default", "template": "..."}, {"name": "tool_use", ...}].
    for (size_t i = 0; i < ct->size(); ++i) {
      const auto& t = (*ct)[i];
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("template") ||
          !t["template"].is_string())
        fail(ErrorKind::kBadInput, "{}: chat_template[{}] must be an object with a string \"name\" and \"template\"",
             config_path.string(), i);
      std::string name = t["name"].get<std::string>();
      if (name == "default") source = t["template"].get<std::string>();
      if (name == "tool_use") tool_source = t["template"].get<std::string>();
    }
  } else if (ct && !ct->is_null()) {
    fail(ErrorKind::kBadInput, "{}: chat_template must be a string or a list of named templates, got {}",
         config_path.string(), ct->dump().substr(0, 80));
  }
  fs::path jinja_path = fs::path(dir) / "chat_template.jinja";
  if (source.empty() && fs::exists(jinja_path)) source = read_file(jinja_path.string());
  if (source.empty())
    fail(ErrorKind::kNotFound, "{}: no chat_template in tokenizer_config.json and no chat_template.jinja", dir);
  return ChatTemplate(source, tool_source, specials);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs,
                                 const jinja::RenderLimits& limits) const {
  using jinja::Value;
  std::map<std::string, Value> vars;
  for (auto& [k, v] : special_tokens_.items()) vars[k] = Value::from_json(v);
  vars["messages"] = Value::from_json(messages);
  vars["tools"] = tools.is_null() ? Value::none() : Value::from_json(tools);
  vars["documents"] = Value::none();
  vars["add_generation_prompt"] = Value(add_generation_prompt);
  if (extra_kwargs.is_object())
    for (auto& [k, v] : extra_kwargs.items()) vars[k] = Value::from_json(v);
  const jinja::Template& t = (tool_template_ && !tools.is_null()) ? *tool_template_ : *template_;
  return t.render(vars, limits);
}

std::string ChatTemplate::render(const nlohmann::json& messages, const nlohmann::json& tools, bool add_generation_prompt,
                                 const nlohmann::json& extra_kwargs, const jinja::RenderLimits& limits) const {
  auto conv = [](const nlohmann::json& j) { return nlohmann::ordered_json::parse(j.dump()); };
  return render(conv(messages), conv(tools), add_generation_prompt, conv(extra_kwargs), limits);
}

}  // namespace nextn
