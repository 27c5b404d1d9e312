// cli/chat_template.cc — `nextn chat-template --model DIR --messages FILE.json
// [--tools FILE.json] [--no-generation-prompt] [--kwargs JSON]`: prints the prompt text
// the model's chat template renders (no trailing newline added).
// For tests: `--batch FILE.jsonl` renders one case per line {"messages", "tools",
// "add_generation_prompt", "kwargs"} and prints one JSON line per case: {"text": s} or
// {"error": message}.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/command.h"
#include "cli/template_limits.h"
#include "util/error.h"
#include "util/file.h"

namespace nextn {

namespace {

nlohmann::ordered_json read_json_file(const std::string& path) {
  try {
    return nlohmann::ordered_json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadInput, "{}: invalid JSON: {}", path, e.what());
  }
}

void print_line(const nlohmann::ordered_json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace

Command add_chat_template_command(CLI::App& root) {
  struct Options {
    std::string model = NEXTN_DEFAULT_MODEL;
    std::string messages, tools, kwargs, batch;
    bool no_generation_prompt = false;
    jinja::RenderLimits limits;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* app = root.add_subcommand("chat-template", "Render a model's chat template for a conversation");
  app->add_option("--model", opts->model, "Model directory (tokenizer_config.json / chat_template.jinja)");
  app->add_option("--messages", opts->messages, "JSON file with the messages array");
  app->add_option("--tools", opts->tools, "JSON file with the tools array");
  app->add_option("--kwargs", opts->kwargs, "JSON object of extra template variables, e.g. {\"enable_thinking\":false}");
  app->add_flag("--no-generation-prompt", opts->no_generation_prompt, "add_generation_prompt=false");
  app->add_option("--batch", opts->batch, "JSONL file of cases (see source)");
  add_template_limit_flags(*app, opts->limits);
  return {app, [opts]() -> int {
            ChatTemplate t = ChatTemplate::from_model_dir(opts->model);
            if (!opts->batch.empty()) {
              std::ifstream in(opts->batch);
              if (!in) fail(ErrorKind::kNotFound, "{}: cannot open file", opts->batch);
              std::string line;
              while (std::getline(in, line)) {
                if (line.empty()) continue;
                auto c = nlohmann::ordered_json::parse(line);
                try {
                  std::string text = t.render(c.value("messages", nlohmann::ordered_json::array()),
                                              c.value("tools", nlohmann::ordered_json()),
                                              c.value("add_generation_prompt", false),
                                              c.value("kwargs", nlohmann::ordered_json::object()), opts->limits);
                  print_line({{"text", text}});
                } catch (const Error& e) {
                  print_line({{"error", e.what()}});
                }
              }
              return 0;
            }
            if (opts->messages.empty()) fail(ErrorKind::kBadInput, "chat-template: --messages FILE.json is required");
            auto messages = read_json_file(opts->messages);
            auto tools = opts->tools.empty() ? nlohmann::ordered_json() : read_json_file(opts->tools);
            nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
            if (!opts->kwargs.empty()) {
              try {
                kwargs = nlohmann::ordered_json::parse(opts->kwargs);
              } catch (const nlohmann::json::exception& e) {
                fail(ErrorKind::kBadInput, "--kwargs: invalid JSON: {}", e.what());
              }
            }
            std::string text = t.render(messages, tools, !opts->no_generation_prompt, kwargs, opts->limits);
            std::fwrite(text.data(), 1, text.size(), stdout);
            return 0;
          }};
}

}  // namespace nextn
