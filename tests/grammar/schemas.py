"""tests/grammar/schemas.py — the structured-output schema set: nested objects, recursion,
enums, patterns, bounded numbers, unions, formats, arrays (used by test_schema_outputs.py
and by `nextn bench`'s json-schema prompt kind through data/). Strings are mostly bounded
(maxLength, enum, pattern, format) so that a random model, which writes random text
wherever the grammar lets it, still finishes inside max_tokens."""

S = lambda n: {"type": "string", "maxLength": n}  # noqa: E731

SCHEMAS = {
    "flat_object": {"type": "object", "properties": {"name": S(12), "age": {"type": "integer", "minimum": 0,
                    "maximum": 150}}, "required": ["name", "age"], "additionalProperties": False},
    "all_optional": {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"},
                     "c": {"type": "integer", "minimum": -5, "maximum": 5}}},
    "enum_string": {"type": "string", "enum": ["red", "green", "blue", "dark \"grey\""]},
    "enum_mixed": {"enum": [1, "two", None, True, {"k": [3]}]},
    "const_value": {"const": {"version": 2, "tags": ["a", "b"]}},
    "integer_range": {"type": "integer", "minimum": 1900, "maximum": 2100},
    "integer_negative": {"type": "integer", "minimum": -1000, "maximum": -10},
    "integer_exclusive": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 64},
    "number_bounded": {"type": "number", "minimum": 0, "maximum": 1},
    "number_free": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                    "required": ["x", "y"]},
    "boolean": {"type": "boolean"},
    "null": {"type": "null"},
    "pattern_code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"},
    "pattern_alternation": {"type": "string", "pattern": "^(cat|dog|bird)s?( [0-9]+)?$"},
    "pattern_classes": {"type": "string", "pattern": "^\\w{2,6}\\.\\d{1,3}[a-f]?$"},
    "pattern_unanchored": {"type": "string", "pattern": "ab+c"},
    "string_lengths": {"type": "string", "minLength": 3, "maxLength": 6},
    "format_date": {"type": "string", "format": "date"},
    "format_time": {"type": "string", "format": "time"},
    "format_datetime": {"type": "string", "format": "date-time"},
    "format_uuid": {"type": "string", "format": "uuid"},
    "format_email": {"type": "string", "format": "email"},
    "array_bounded": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                      "minItems": 2, "maxItems": 5},
    "array_of_objects": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {
                         "id": {"type": "integer", "minimum": 1, "maximum": 99}, "label": S(6)},
                         "required": ["id"]}},
    "array_empty_allowed": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 4},
    "nested": {"type": "object", "properties": {
        "user": {"type": "object", "properties": {"name": S(8), "email": {"type": "string", "format": "email"}},
                 "required": ["name"]},
        "roles": {"type": "array", "items": {"enum": ["admin", "dev", "ops"]}, "maxItems": 3},
        "active": {"type": "boolean"}}, "required": ["user", "active"]},
    "anyof_types": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "null"},
                              {"type": "string", "maxLength": 4}]},
    "oneof_disjoint": {"oneOf": [{"type": "object", "properties": {"kind": {"const": "circle"},
                       "r": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["kind", "r"]},
                       {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer",
                        "minimum": 1, "maximum": 9}}, "required": ["kind", "side"]}]},
    "type_list": {"type": ["integer", "boolean"], "minimum": 0, "maximum": 3},
    "nullable_field": {"type": "object", "properties": {"note": {"type": ["string", "null"], "maxLength": 5}},
                       "required": ["note"]},
    "recursive_tree": {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 99},
        "kids": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
        "$ref": "#/$defs/node"},
    "recursive_root": {"type": "object", "properties": {"name": S(4), "next": {"anyOf": [{"$ref": "#"},
                       {"type": "null"}]}}, "required": ["name", "next"]},
    "definitions_ref": {"definitions": {"point": {"type": "object", "properties": {
        "x": {"type": "integer", "minimum": -9, "maximum": 9}, "y": {"type": "integer", "minimum": -9, "maximum": 9}},
        "required": ["x", "y"]}}, "type": "array", "items": {"$ref": "#/definitions/point"}, "minItems": 1,
        "maxItems": 3},
    "map_values": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 5}},
    "allof_single": {"allOf": [{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}]},
    "annotated": {"title": "Weather", "description": "A report", "type": "object", "properties": {
        "city": {"type": "string", "maxLength": 10, "description": "the city"},
        "unit": {"enum": ["C", "F"], "default": "C"},
        "temp": {"type": "integer", "minimum": -60, "maximum": 60, "examples": [21]}},
        "required": ["city", "unit", "temp"], "additionalProperties": False},
    "empty_object": {"type": "object", "additionalProperties": False},
    "unicode_enum": {"enum": ["caf\u00e9", "\u00fcber", "\u65e5\u672c", "\U0001F600"]},
}
