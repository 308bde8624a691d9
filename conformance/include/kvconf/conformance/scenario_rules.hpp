// The rules of a scenario pair on kvconf's engine (docs/SCENARIOS.md): both sides of scenario s (engine/scenario.hpp)
// run free-running with the shared draws, then
//   scenario_path            every forward call of both sides fed the tokens and attended over the cached rows the
//                            scenario says (side A: its prefix rows, chunks, refill prefill, preempt recompute; side
//                            B: the plain path),
//                            so a side that quietly took another path fails;
//   scenario_shared_bitwise  refill, restore and preempt: the steps before the event are the same computation on both
//                            sides;
//   scenario_bitwise         restore (every engine), and every scenario under a profile claiming cache_invariant:
//                            every step's logits and tokens bit for bit;
//   cached_kv                side A's cached K/V rows against side B's (cached_kv_rule below; kv_dtype: side A's
//                            cache within its format's step of side B's, cached_kv_format_rule);
//   otherwise (not kv_dtype, whose narrower cache is no rounding-sized difference: its logits' effect is reported in
//   the pair record, first flip, KL, max |dz|) the near-tie rules of FlipsAreNearTies on the pair (flip_rules,
//   model_cases.hpp: perturbation sized as rounding, and every flip a near tie against the fp32 reference `ref`).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvconf/analysis/paired.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/engine/scenario.hpp"

namespace kvconf::conformance {

// The calls side A and side B of scenario s must make for a prompt of n tokens over `steps` steps.
struct ExpectedCalls {
  std::vector<engine::CallRecord> a, b;
};
// `shared`: the prefix rows taken (prefix only).
ExpectedCalls expected_calls(engine::Scenario s, const engine::ScenarioOptions& so, std::size_t prompt_tokens,
                             std::size_t shared, std::size_t steps);

// scenario_path: `a` and `b`, the calls each side made, against `want`. A failure names the first call that differs,
// after the side's label ("side A", or a trace's file), the fields that differ (fed, cached, batch) and, when the
// side's call_of_step is given (steps_a, steps_b: the call whose logits chose each token), the step that call served;
// a pass says how the scenario side started.
CheckResult scenario_path_rule(const std::string& scenario, const std::string& label_a,
                               const std::vector<engine::CallRecord>& a, const std::string& label_b,
                               const std::vector<engine::CallRecord>& b, const ExpectedCalls& want, std::uint64_t seed,
                               const std::vector<std::size_t>& steps_a = {},
                               const std::vector<std::size_t>& steps_b = {});
// On a pair whose logits were kept: scenario_shared_steps_bitwise for refill, restore and preempt (the steps before
// at_step), and scenario_bitwise for restore and whenever `bitwise_why` is not empty (why it is demanded: an invariant
// profile, --expect-bitwise). Tokens and logits, over every step either side has (a missing step is a difference).
CheckResults scenario_bitwise_rules(engine::Scenario s, std::size_t at_step, const std::string& bitwise_why,
                                    const analysis::PairedRun& run, std::uint64_t seed);

// One side's cached K/V rows, per layer (rows, kv heads, head_dim) flattened: an engine cache's or a trace's.
struct KvRows {
  std::size_t kv_dim = 0, head_dim = 0;
  std::vector<std::span<const float>> k, v;  // n_layers entries; K after RoPE
};
KvRows kv_rows_of(const engine::KvCache& c, std::size_t head_dim);

// How far each of the first `rows` cache rows must agree bit for bit (cached_kv_rule's `gate`), from the calls that
// computed them (each row's last call that fed it: fed rows from `cached` on; `a`, `b`: the calls behind each side's
// cache): 2 (every layer) where both sides' calls are the same call from an empty cache (fed, batch rows equal, cached
// 0: the same forward over the same tokens); 1 (layer 0, whose input is the embedding rows on both sides) where the
// calls had the same number of rows M, or, given the kernels, M's for which the input norm and the K/V projection
// take the same paths (NormKernel::path: PyTorch's reduction layout depends on the row count; GemmKernel::path with
// N = kv_dim, K = hidden) and those paths are the arithmetic itself (not cuBLAS's model of an undisclosed order, not
// a black box's any order: their names do not change with M whatever the library does); 0 otherwise, and for a row
// no call fed (a prefix taken from another request).
std::vector<int> kv_gate(const std::vector<engine::CallRecord>& a, const std::vector<engine::CallRecord>& b,
                         std::size_t rows, const kernels::NormKernel* norm = nullptr,
                         const kernels::GemmKernel* g = nullptr, std::size_t kv_dim = 0, std::size_t hidden = 0);

// cached_kv: side A's cached K/V against side B's over the first `rows` rows (the rows of the tokens both sides
// share): bit for bit in every layer for restore (every engine) and when `bitwise_demand` is not empty (an
// invariant profile, --expect-bitwise), otherwise per row as `gate` says (0: measured only, 1: layer 0 bit for bit, 2:
// every layer bit for bit); the rest measured (the largest |ΔK| and |ΔV| over every layer and row, in the detail). A
// failure names the layer, row and head of the first difference. A cache kept in a narrower format than the model
// computes in fails it on the prompt's rows.
// layer0_bound (per row; empty: none): for a row whose gate is 0 and that both sides computed (by different paths),
// the per-element bound of |ΔK|, |ΔV| in layer 0 ((2·kv_dim): K then V; the sum of both sides' layer0_kv_bound);
// such values pass within it, and the result is then a bound result (error, bound and headroom of the worst value).
CheckResult cached_kv_rule(const std::string& scenario, const KvRows& a, const KvRows& b, std::size_t rows,
                           const std::vector<int>& gate, const std::string& bitwise_demand, std::uint64_t seed,
                           const std::vector<std::vector<double>>& layer0_bound = {});
// kv_dtype's cached_kv: side A's cache kept in format f against side B's, kept in the model's own format (values of
// `storage`). Layer 0's first `rows` rows (those both sides computed by the same call from the same inputs: the
// prompt's) must be within f's step of side B's values, per element (engine::within_step: the bound kv_injection's
// quantizer_within_step uses); every layer's first `measured_rows` rows are measured (max |dK|, |dV| in the detail).
// A failure names the worst value's K/V, row and head, both values and its bound.
CheckResult cached_kv_format_rule(engine::KvFormat f, Format storage, const KvRows& a, const KvRows& b,
                                  std::size_t rows, std::size_t measured_rows, std::uint64_t seed);

// The rows M of the call that last fed each of the first `rows` cache rows (0: no call fed it).
std::vector<std::size_t> kv_row_calls(const std::vector<engine::CallRecord>& calls, std::size_t rows);

// The options the model suites and `kvconf model --scenario` use for a prompt: prefix shares the prompt's first half
// (at least one token) with a donor made of that half and `other`'s tokens after its first (a second request behind
// the same system prompt); chunks of 4; refill, restore and preempt at step max(1, steps / 3); batch with `other`
// followed by the prompt (longer) and `other`'s first third of min(|other|, |prompt|) tokens (shorter, at least one).
engine::ScenarioOptions scenario_options(const std::vector<int>& prompt, const std::vector<int>& other,
                                         std::size_t steps);

// `ctx` runs both sides (reset for each); `ref` is the fp32 context of FlipsAreNearTies (for the fp32 profile
// itself: reordered_fp32_kernels, whose difference is fp32's own rounding). `hooks`: a planted scenario
// fault, or null. run_out (may be null) receives the pair (logits kept).
CheckResults check_scenario(engine::Context& ctx, engine::Context& ref, const std::vector<int>& prompt,
                            engine::Scenario s, const engine::ScenarioOptions& so, const analysis::PairOptions& o,
                            std::uint64_t seed, const engine::ScenarioHooks* hooks = nullptr,
                            analysis::PairedRun* run_out = nullptr);

}  // namespace kvconf::conformance
