// The protocol library's names (kvconf::protocol: run pairs, the result store, GSM8K, BadInput) as the commands of
// kvconf::tools use them, unqualified.
#pragma once

#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::tools {
using namespace kvconf::protocol;
}  // namespace kvconf::tools
