// grammar/json_schema.h — JSON Schema → GBNF text (then gbnf.h's parser), so that every
// sentence of the grammar is a JSON text that validates against the schema.
// Supported: type (and lists of types), properties / required / additionalProperties,
// items / minItems / maxItems, enum, const, pattern (a regex subset, pattern.h),
// minLength / maxLength, format date / time / date-time / uuid / email, minimum /
// maximum / exclusiveMinimum / exclusiveMaximum on integers (and on numbers, whose
// values are then an integer or a non-negative decimal strictly inside the bounds),
// anyOf / oneOf (as alternatives: oneOf branches should not overlap), a one-element
// allOf, $ref into the document ("#", "#/$defs/x", any JSON pointer; recursion allowed),
// annotations (title, description, default, examples, ...). Any other keyword is a
// SchemaError naming it and its JSON pointer — never ignored. Declared properties are
// generated in the schema's order; with declared properties, additional ones are not
// generated (allowed is not required).
#pragma once
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

#include "grammar/limits.h"

namespace nextn::grammar {

struct SchemaError : std::runtime_error {
  SchemaError(const std::string& pointer, const std::string& what)
      : std::runtime_error((pointer.empty() ? std::string("(root)") : pointer) + ": " + what), pointer(pointer) {}
  std::string pointer;  // JSON pointer of the offending keyword ("" = the root)
};

enum class Whitespace {
  kFlexible,  // one optional space, or a newline and up to 20 spaces/tabs of indentation
  kSpace,     // one optional space: {"a": 1} (single-line answers, such as tool calls)
  kCompact,   // none: {"a":1}
};

// The grammar whose root matches the JSON texts valid under `schema`.
// Throws SchemaError for what the schema says, GrammarLimitError past
// limits.schema_max_depth.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, Whitespace ws = Whitespace::kFlexible,
                                const GrammarLimits& limits = {});

}  // namespace nextn::grammar
