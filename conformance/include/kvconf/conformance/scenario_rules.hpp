// The rules of a scenario pair on kvconf's engine (docs/SCENARIOS.md): both sides of scenario s (engine/scenario.hpp)
// run free-running with the shared draws, then
//   scenario_path            every forward call of both sides fed the tokens and attended over the cached rows the
//                            scenario says (side A: its prefix rows, chunks, refill prefill; side B: the plain path),
//                            so a side that quietly took another path fails;
//   scenario_shared_bitwise  refill and restore: the steps before the event are the same computation on both sides;
//   scenario_bitwise         restore (every engine), and every scenario under a profile claiming cache_invariant:
//                            every step's logits and tokens bit for bit;
//   otherwise the near-tie rules of FlipsAreNearTies on the pair (flip_rules, model_cases.hpp: perturbation sized as
//   rounding, and every flip a near tie against the fp32 reference `ref`).
#pragma once

#include <cstdint>
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
// after the side's label ("side A", or a trace's file); a pass says how the scenario side started.
CheckResult scenario_path_rule(const std::string& scenario, const std::string& label_a,
                               const std::vector<engine::CallRecord>& a, const std::string& label_b,
                               const std::vector<engine::CallRecord>& b, const ExpectedCalls& want, std::uint64_t seed);
// On a pair whose logits were kept: scenario_shared_steps_bitwise for refill and restore (the steps before at_step),
// and scenario_bitwise for restore and whenever `bitwise_why` is not empty (why it is demanded: an invariant profile,
// --expect-bitwise). Tokens and logits, over every step either side has (a missing step is a difference).
CheckResults scenario_bitwise_rules(engine::Scenario s, std::size_t at_step, const std::string& bitwise_why,
                                    const analysis::PairedRun& run, std::uint64_t seed);

// The options the model suites and `kvconf model --scenario` use for a prompt: prefix shares the prompt's first half
// (at least one token) with a donor made of that half and `other`'s tokens after its first (a second request behind
// the same system prompt); chunks of 4; refill and restore after step max(1, steps / 3).
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
