// chat/jinja_globals.cc — the global callables transformers gives chat templates:
// range(), namespace() (the one object whose attributes {% set ns.x %} may assign),
// dict(), raise_exception() and strftime_now().
#include <ctime>

#include "chat/jinja_builtins.h"
#include "chat/jinja_python.h"

namespace nextn::jinja {

namespace {

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

void install_globals(std::map<std::string, Value>& g, std::function<void(int64_t)> charge) {
  g["range"] = Value::function(
      [charge](Args& a) {
        int64_t start = 0, stop = 0, step = 1;
        if (a.positional.size() == 1) stop = a.positional[0].as_int();
        else if (a.positional.size() >= 2) {
          start = a.positional[0].as_int();
          stop = a.positional[1].as_int();
          if (a.positional.size() >= 3) step = a.positional[2].as_int();
        } else problem("range expected at least 1 argument");
        if (step == 0) problem("range() arg 3 must not be zero");
        // Python's len(range(...)), in unsigned arithmetic so that no bound overflows.
        uint64_t span = step > 0 ? (stop > start ? uint64_t(stop) - uint64_t(start) : 0)
                                 : (start > stop ? uint64_t(start) - uint64_t(stop) : 0);
        uint64_t stride = step > 0 ? uint64_t(step) : uint64_t(0) - uint64_t(step);
        uint64_t n = span == 0 ? 0 : (span - 1) / stride + 1;
        charge(n > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(n));
        List l;
        l.reserve(n);
        for (uint64_t k = 0; k < n; ++k) l.push_back(Value(int64_t(uint64_t(start) + k * uint64_t(step))));
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
