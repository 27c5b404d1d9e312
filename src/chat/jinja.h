// chat/jinja.h — a Jinja2 interpreter for the subset Hugging Face chat templates use,
// with transformers' environment: ImmutableSandboxedEnvironment semantics (no mutation
// of lists/dicts), trim_blocks, lstrip_blocks, loop controls, tojson without HTML
// escaping (json.dumps(ensure_ascii=False)), raise_exception(), strftime_now(),
// namespace(), macros, slicing with negative steps, Python str/dict methods, and the
// filters/tests real templates use. Values follow Python semantics (str() of lists and
// dicts, True/False/None, float repr).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_limits.h"
#include "chat/jinja_value.h"

namespace nextn::jinja {

class Template {
 public:
  // Parses source; syntax errors are nextn::Error "chat template: line L, column C: ...".
  explicit Template(const std::string& source);
  // Renders with the given top-level variables (plus the globals range, namespace, dict,
  // raise_exception, strftime_now). Runtime errors name the line and column too.
  // Exceeding a limit is a nextn::Error (kBadInput) naming the limit.
  std::string render(const std::map<std::string, Value>& variables, const RenderLimits& limits = {}) const;

 private:
  Body body_;
};

}  // namespace nextn::jinja
