// The planted scenario faults (kvconf::engine_faults): realistic bugs of the operations the scenarios exercise, as
// ScenarioHooks (scenario.hpp) that run_scenario takes. Beside the engine with the forward pass's faults (faults.hpp);
// kvconf's own runs never set them. Each is caught by its scenario's rules (docs/SCENARIOS.md).
#pragma once

#include <cstdint>
#include <vector>

#include "kvconf/engine/scenario.hpp"

namespace kvconf::engine {

enum class ScenarioFault : std::uint8_t {
  prefix_row_short,      // prefix: the request takes one row fewer than the shared prefix (an off-by-one in the
                         // prefix length): the token before the first prefilled one is never seen
  chunk_boundary_skip,   // chunked: the second chunk starts one token late (a chunk boundary off by one)
  refill_forgets_layer,  // refill: the rebuilt cache's last layer keeps zeros (its blocks reallocated, never rewritten)
  restore_rounds_cache,  // restore: the saved cache comes back with the last bit of every K/V value cleared (a lossy
                         // save: rounded toward zero by up to one ulp of the storage format)
  batch_padding_leaks,   // batch: a sequence shorter than the batch's longest attends over the padding in front of it
                         // (a left-padded, zero-initialised K/V buffer whose key mask was dropped)
  preempt_forgets_layer,  // preempt: the cache the recompute built keeps zeros in its last layer (its blocks
                          // reallocated, never rewritten); the recompute's own logits are right, the later steps not
  kv_dtype_truncates,     // kv_dtype: the cache's quantizer rounds toward zero instead of to nearest (a cast where a
                          // rounding belonged): errors up to a whole step of the format, twice what it allows
};
const char* scenario_fault_name(ScenarioFault f);
std::vector<ScenarioFault> all_scenario_faults();
Scenario scenario_of(ScenarioFault f);                 // the scenario whose run exercises it
const ScenarioHooks& scenario_hooks(ScenarioFault f);  // static storage

}  // namespace kvconf::engine
