// cli/template_limits.cc — see template_limits.h.
#include "cli/template_limits.h"

#include "cli/flag_checks.h"

namespace nextn {

void add_template_limit_flags(CLI::App& app, jinja::RenderLimits& limits) {
  // A chat template from a model directory is code nextn runs for every chat request.
  app.add_option("--template-max-steps", limits.max_steps, "Chat-template evaluation steps per render")
      ->capture_default_str()
      ->check(integer_in(1));
  app.add_option("--template-max-depth", limits.max_depth, "Chat-template nesting depth (macro recursion, blocks)")
      ->capture_default_str()
      ->check(integer_in(1, 100000));
  app.add_option("--template-max-output", limits.max_output_bytes,
                 "Largest rendered prompt (and any string built while rendering), bytes")
      ->capture_default_str()
      ->check(integer_in(1));
  app.add_option("--template-timeout", limits.max_seconds, "Seconds one chat-template render may take")
      ->capture_default_str()
      ->check(finite_in(0.001, 3600));
}

}  // namespace nextn
