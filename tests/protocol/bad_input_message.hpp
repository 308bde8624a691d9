// The message of the protocol::BadInput a call throws ("" when it throws none), for the protocol library's tests.
#pragma once

#include <string>

#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::protocol {

template <class F>
std::string bad_input(F f) {
  try {
    f();
  } catch (const BadInput& e) {
    return e.what();
  }
  return "";
}

}  // namespace kvconf::protocol
