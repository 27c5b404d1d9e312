// chat/jinja_python.h — the Python semantics shared by the Jinja evaluator and its
// builtins (filters, tests, methods): str.strip/split/rsplit/replace, slice indices,
// ordering, len(), iteration, arithmetic, `in`, and the RuntimeProblem a builtin throws
// (the evaluator rethrows it as nextn::Error naming the template line and column).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace nextn::jinja {

// Thrown by builtins; rethrown as nextn::Error with the call's line/column.
struct RuntimeProblem {
  std::string message;
};
[[noreturn]] void problem(std::string message);

// Python str.isspace() for one code point, and the code point of one UTF-8 character.
bool is_py_space(char32_t c);
char32_t decode_cp(const std::string& ch);

// str.strip/lstrip/rstrip (chars: a str of characters to strip, or null for whitespace).
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
// str.lower()/str.upper() (full Unicode case mapping, as Python does).
std::string py_lower(const std::string& s);
std::string py_upper(const std::string& s);
// str.split/rsplit (sep null or None: runs of whitespace; maxsplit < 0: no limit).
std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(const std::string& s, const Value* sep, int64_t maxsplit);
// str.replace (count < 0: every occurrence).
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);

// The indices seq[start:stop:step] visits in a sequence of length len.
std::vector<int64_t> slice_indices(int64_t len, const Value& start, const Value& stop, const Value& step_v);
// -1, 0 or 1 as Python orders numbers, strings and lists; anything else is a problem.
int compare_values(const Value& a, const Value& b);
// len(v) (undefined has length 0).
int64_t length_of(const Value& v);
// Iteration: lists, dict keys, string characters; undefined iterates as empty.
List iterate(const Value& v);
// Argument i or keyword `name` as an integer, or def when absent or None.
int64_t int_arg(const Args& a, size_t i, const std::string& name, int64_t def);
// a op b for + - * / // % ** with Python's int/float and str/list rules.
Value binary_arith(const std::string& op, const Value& a, const Value& b);
// `item in container`.
bool python_contains(const Value& container, const Value& item);
// Jinja's attribute lookup by dotted path ("a.b.0"), as attribute= arguments use it.
Value attribute_of(const Value& v, const std::string& path);

}  // namespace nextn::jinja
