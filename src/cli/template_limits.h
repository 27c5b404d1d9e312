// cli/template_limits.h — the flags that bound chat-template renders, shared by the
// commands that render a model's template (serve, chat-template).
#pragma once
#include <CLI/CLI.hpp>

#include "chat/jinja_limits.h"

namespace nextn {

// --template-max-steps, --template-max-depth, --template-max-output, --template-timeout.
void add_template_limit_flags(CLI::App& app, jinja::RenderLimits& limits);

}  // namespace nextn
