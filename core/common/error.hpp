// The host's one error type. Inside the host errors are exceptions of this type (never
// across the plugin boundary, where they become pb_status values). Messages say what was
// expected, what was found and what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace patchbay {

enum class ErrorKind {
  kInvalidArgument,  // bad user input: config, command line, file contents
  kNotFound,         // a named file, key, plugin or component is missing
  kPluginRefused,    // a plugin failed validation or loading
  kComponentNotFound,  // no loaded plugin provides the named component
  kIo,               // reading or writing failed
  kNumeric,          // NaN/Inf or another numeric failure
  kInternal          // a bug in Patchbay
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace patchbay
