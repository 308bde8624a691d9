// The planted engine faults (engine::Fault, context.hpp) as ForwardHooks (forward_hooks.hpp), kept apart from the
// forward pass. Each fault overrides the one hook it plants; Fault::none is the plain model. Cache-path faults act on
// the cached path only (decode, or prefill + decode); architecture faults act on every path alike (tests/adapters
// catches them against transformers).
#pragma once

#include "forward_hooks.hpp"
#include "kvconf/engine/context.hpp"

namespace kvconf::engine::faults {

// The hooks that plant `f` (plain_forward() for Fault::none); static storage, one per fault.
const ForwardHooks& hooks(Fault f);

}  // namespace kvconf::engine::faults
