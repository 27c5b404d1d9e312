// tests/fuzz/jinja_fuzz.cc — any template source is parsed and rendered (with a chat
// conversation and tools as variables, under tight render limits) or refused with a
// nextn::Error naming the line/column or the limit; never a crash, a stack overflow or
// an unbounded loop or allocation.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "chat/jinja.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::map<std::string, nextn::jinja::Value> variables = [] {
    auto conversation = nlohmann::ordered_json::parse(R"({
      "messages": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "What is 2+2?"},
                   {"role": "assistant", "content": "<think>sum</think>4",
                    "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
                   {"role": "tool", "content": "4"}],
      "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}],
      "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true})");
    std::map<std::string, nextn::jinja::Value> v;
    for (auto& [k, x] : conversation.items()) v[k] = nextn::jinja::Value::from_json(x);
    return v;
  }();
  nextn::jinja::RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_seconds = 2;
  try {
    nextn::jinja::Template t(std::string(reinterpret_cast<const char*>(data), size));
    t.render(variables, limits);
  } catch (const nextn::Error&) {
  }
  return 0;
}
