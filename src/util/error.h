// util/error.h — the one error type of nextn.
// Every user-facing failure (bad checkpoint, bad request, bad template) is an
// nextn::Error carrying a kind and a message that names the file/tensor/key/field.
// The CLI maps it to exit code 2; the server maps it to a 4xx JSON error.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace nextn {

enum class ErrorKind {
  kBadInput,     // malformed file, request or template: the user's data is wrong
  kNotFound,     // a file, tensor, key, route or model does not exist
  kUnsupported,  // valid input that nextn does not implement (e.g. an unknown architecture)
  kResource,     // out of memory/context/queue space
  kInternal,     // a bug in nextn
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace nextn
