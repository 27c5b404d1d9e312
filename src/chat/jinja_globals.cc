// chat/jinja_globals.cc — the global callables transformers gives chat templates:
// range(), namespace() (the one object whose attributes {% set ns.x %} may assign),
// dict(), raise_exception() and strftime_now().
#include <ctime>

#include "chat/jinja_builtins.h"
#include "chat/jinja_python.h"

namespace nextn::jinja {

namespace {

// range() refuses to build more than this many items: a template asking for more is
// broken or hostile, and the list would exhaust memory.
constexpr size_t kMaxRangeItems = 10000000;

// dict(...) and namespace(...): positional dicts merged in order, then keyword arguments.
Value dict_from_args(Args& a, bool is_namespace) {
  Dict d;
  d.is_namespace = is_namespace;
  for (auto& p : a.positional)
    if (p.is_dict())
      for (auto& [k, v] : p.dict().items) d.set(k, v);
  for (auto& [k, v] : a.keyword) d.set(k, v);
  return Value(std::move(d));
}

}  // namespace

void install_globals(std::map<std::string, Value>& g) {
  g["range"] = Value::function(
      [](Args& a) {
        int64_t start = 0, stop = 0, step = 1;
        if (a.positional.size() == 1) stop = a.positional[0].as_int();
        else if (a.positional.size() >= 2) {
          start = a.positional[0].as_int();
          stop = a.positional[1].as_int();
          if (a.positional.size() >= 3) step = a.positional[2].as_int();
        } else problem("range expected at least 1 argument");
        if (step == 0) problem("range() arg 3 must not be zero");
        List l;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          l.push_back(Value(i));
          if (l.size() > kMaxRangeItems) problem("range too large");
        }
        return Value(std::move(l));
      },
      "range");
  g["namespace"] = Value::function([](Args& a) { return dict_from_args(a, true); }, "namespace");
  g["dict"] = Value::function([](Args& a) { return dict_from_args(a, false); }, "dict");
  g["raise_exception"] = Value::function(
      [](Args& a) -> Value { problem(a.positional.empty() ? std::string("raise_exception") : a.positional[0].to_str()); },
      "raise_exception");
  g["strftime_now"] = Value::function(
      [](Args& a) {
        std::string format = a.positional.empty() ? std::string("%Y-%m-%d") : a.positional[0].to_str();
        std::time_t now = std::time(nullptr);
        std::tm tm{};
        localtime_r(&now, &tm);
        char buf[512];
        size_t n = std::strftime(buf, sizeof buf, format.c_str(), &tm);
        return Value(std::string(buf, n));
      },
      "strftime_now");
}

}  // namespace nextn::jinja
