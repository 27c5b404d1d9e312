// cli/main.cc — the `nextn` binary: one subcommand per file, listed here.
#include <cstdio>
#include <vector>

#include "cli/command.h"
#include "kernels/kernels.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"nextn — LLM inference server with speculative decoding", "nextn"};
  app.set_version_flag("--version", NEXTN_VERSION);
  app.require_subcommand(1);
  std::vector<nextn::Command> commands = {
      // One line per subcommand.
      nextn::add_debug_logits_command(app),
      nextn::add_debug_image_command(app),
      nextn::add_generate_command(app),
      nextn::add_bench_command(app),
      nextn::add_tokenize_command(app),
      nextn::add_chat_template_command(app),
      nextn::add_serve_command(app),
      nextn::add_perf_command(app),
      nextn::add_kv_eval_command(app),
      nextn::add_quantize_command(app),
      nextn::add_gguf_dump_command(app),
      nextn::add_weight_eval_command(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    nextn::limit_simd_target_from_environment();
    for (auto& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const nextn::Error& e) {
    std::fprintf(stderr, "nextn: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nextn: internal error: %s\n", e.what());
    return 3;
  }
  return 2;
}
