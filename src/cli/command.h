// cli/command.h — how subcommands plug into the `nextn` binary.
// Each subcommand lives in its own file and exposes one add_*_command function,
// listed once in main.cc. run() returns the process exit code (0 ok, 2 bad input).
#pragma once
#include <CLI/CLI.hpp>

#include <functional>

namespace nextn {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_generate_command(CLI::App& root);
Command add_serve_command(CLI::App& root);
Command add_bench_command(CLI::App& root);
Command add_tokenize_command(CLI::App& root);
Command add_chat_template_command(CLI::App& root);
Command add_debug_logits_command(CLI::App& root);
Command add_debug_image_command(CLI::App& root);
Command add_perf_command(CLI::App& root);
Command add_kv_eval_command(CLI::App& root);
Command add_quantize_command(CLI::App& root);
Command add_gguf_dump_command(CLI::App& root);
Command add_weight_eval_command(CLI::App& root);

}  // namespace nextn
