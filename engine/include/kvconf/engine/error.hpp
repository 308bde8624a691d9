// The one error type of loading and running models: a message naming the file, the field and what was expected,
// so `kvconf generate` can print it as its one line and exit with status 2.
#pragma once

#include <stdexcept>
#include <string>

namespace kvconf::engine {

struct LoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "<file>: <field>: <problem>" (field may be empty).
[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& problem);

}  // namespace kvconf::engine
