// chat/jinja_limits.h — the bounds every template render runs under (kept apart from
// the interpreter so that callers such as the server can hold them cheaply).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace nextn::jinja {

// Bounds on one render, so that a hostile template ends with a clear error instead of
// exhausting the stack, the memory or the time of the process that renders it. The
// defaults are far above what real chat templates need (tests/chat/test_templates.py
// renders every real template under 1 % of the step and output budgets and a quarter of
// the depth) and each is reported by name when exceeded.
struct RenderLimits {
  int max_depth = 400;                    // nested macro calls, blocks and sub-expressions
  int64_t max_steps = 5'000'000;          // statements run + expressions evaluated + items copied
  size_t max_output_bytes = 16u << 20;    // the rendered text, and any one string built on the way
  double max_seconds = 10.0;              // wall time of the whole render
  const std::atomic<bool>* cancel = nullptr;  // the render stops when this becomes true (shutdown)
};

}  // namespace nextn::jinja
