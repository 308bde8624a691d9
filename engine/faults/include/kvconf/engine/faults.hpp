// The planted engine faults (kvconf::engine_faults): realistic engine bugs for the mutant tests, the cross-check and
// the experiments' planted rules, as ForwardHooks (forward_hooks.hpp) that a Context takes through
// ContextOptions::hooks. Beside the engine, not inside it: kvconf's own runs never set them. Cache-path faults act on
// the cached path only (decode, or prefill + decode); architecture faults act on every path alike (tests/adapters
// catches them against transformers).
#pragma once

#include <cstdint>
#include <vector>

#include "kvconf/engine/context.hpp"
#include "kvconf/engine/forward_hooks.hpp"

namespace kvconf::engine {

enum class Fault : std::uint8_t {
  none,
  rope_decode_off_by_one,   // decode rotates q and k at position pos + 1
  shifted_cache_row,        // decode writes the new K/V row at pos − 1 (the old row is lost, row pos stays empty)
  window_recompute_only,    // the cached path (prefill + decode) ignores the sliding window
  softcap_missing_decode,   // decode attention without the logit softcap
  gqa_modulo_decode,        // decode maps q head h to kv head h mod n_kv (instead of h / group)
  cache_store_toward_zero,  // decode stores K/V with the last bit of each value cleared: a biased store, at most one
                            // ulp toward zero per element, half an ulp on average (sub-ulp on the logits)
  cache_narrow_format,      // the cached path (prefill and decode) stores K/V with 3 fewer significand bits, rounded
                            // to nearest: a cache kept in a narrower format than the model computes in (an fp16
                            // model's cache at bf16's 8-bit significand). Moves the logits by about fp16 rounding
  final_softcap_missing_decode,  // decode returns logits without Gemma-2's final logit softcap (a fused decode LM
                                 // head that forgot it): after the last layer, so only a rule that shares every
                                 // layer's result sees it alone (residual_patching's, docs/EXPERIMENTS.md)
  // Architecture faults: both paths alike, so no cache-ON vs cache-OFF rule can see them; a comparison with another
  // implementation of the architecture does (the transformers cross-check, tests/adapters), given a fixture where the
  // detail matters (the *-obs-tiny fixtures, docs/MODELS.md "Fixtures that can catch what they claim to").
  attn_scale_head_dim,    // attention scale 1/sqrt(head_dim), ignoring Gemma-2's query_pre_attn_scalar
  window_ignored,         // no sliding window on any path
  rms_eps_ignored,        // RMSNorm without its epsilon
  embed_scale_unrounded,  // Gemma-2's embedding scale sqrt(hidden) rounded to fp32, not to the model dtype
};
const char* fault_name(Fault f);
std::vector<Fault> all_faults();           // every cache-path fault (the rules of cache-ON vs cache-OFF catch them)
std::vector<Fault> architecture_faults();  // the four architecture faults above
std::vector<Fault> head_faults();          // final_softcap_missing_decode (the experiments' rules catch it)
std::vector<Fault> cache_faults();         // cache_narrow_format (the scenarios' cached_kv rule catches it)

namespace faults {

// The hooks that plant `f` (plain_forward() for Fault::none); static storage, one per fault.
const ForwardHooks& hooks(Fault f);

}  // namespace faults

// ContextOptions whose hooks plant `f` (nullptr hooks for Fault::none): ContextOptions{capacity, fault} as before.
ContextOptions with_fault(Fault f, ContextOptions o = {});

}  // namespace kvconf::engine
