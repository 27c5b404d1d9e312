// chat/jinja_builtins.h — what the Jinja evaluator looks up by name: filters
// ({{ x | trim }}), tests ({% if x is defined %}), methods of str/dict/list values
// (s.split(",")) and the globals transformers provides (range, namespace, dict,
// raise_exception, strftime_now). Each kind is a name → function table: filters and
// tests in jinja_filters.cc, methods in jinja_methods.cc, globals in jinja_globals.cc.
// The evaluator (jinja_render.cc) only looks names up. Builtins report errors by
// throwing RuntimeProblem (chat/jinja_python.h).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "chat/jinja_value.h"

namespace nextn::jinja {

// v | name(a...). An unknown name is a problem "no filter named 'name'".
Value call_filter(const std::string& name, const Value& v, Args& a);

// v is name(a...). An unknown name is a problem "no test named 'name'".
bool apply_test(const std::string& name, const Value& v, Args& a);

// The bound method s.name, d.name or l.name as a callable value, or undefined when the
// type has no such method.
Value string_method(const std::string& s, const std::string& name);
Value dict_method(const Value& d, const std::string& name);
Value list_method(const Value& l, const std::string& name);

// Adds the global callables to a scope. `charge` is told how many items a global is about
// to create (range), so that the render's step limit applies before any allocation.
void install_globals(std::map<std::string, Value>& scope, std::function<void(int64_t)> charge);

}  // namespace nextn::jinja
