// The error kvconf's commands throw for bad input (a missing or malformed file, an unknown profile, a bad range, an
// unwritable output): the command prints "kvconf <cmd>: <what>" on one line and exits with status 2.
#pragma once

#include <stdexcept>
#include <string>

namespace kvconf::protocol {

struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace kvconf::protocol
