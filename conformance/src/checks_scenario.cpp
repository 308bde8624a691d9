// The scenario rules (scenario_rules.hpp): the path each side took, the steps both sides share, bitwise where the
// scenario or the profile demands it, the near-tie rules otherwise.
#include <algorithm>
#include <limits>
#include <string>

#include "checks_common.hpp"
#include "kvconf/analysis/metrics.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/conformance/scenario_rules.hpp"

namespace kvconf::conformance {
namespace {

using engine::CallRecord;
using engine::Scenario;

std::string calls_text(const std::vector<CallRecord>& v, std::size_t from) {
  std::string s;
  for (std::size_t i = from; i < v.size() && i < from + 4; ++i)
    s += (s.empty() ? "" : " ") + std::string("{fed ") + std::to_string(v[i].fed) + ", cached " +
         std::to_string(v[i].cached) + "}";
  return s.empty() ? "none" : s;
}

// The first call where `have` and `want` differ, as text; empty when they agree.
std::string first_difference(const std::string& side, const std::vector<CallRecord>& have,
                             const std::vector<CallRecord>& want) {
  for (std::size_t i = 0; i < std::max(have.size(), want.size()); ++i) {
    const bool same =
        i < have.size() && i < want.size() && have[i].fed == want[i].fed && have[i].cached == want[i].cached;
    if (!same)
      return side + " call " + std::to_string(i) + ": " + calls_text(have, i) + " where the scenario makes " +
             calls_text(want, i);
  }
  return {};
}

// The largest |z_A − z_B| over steps [0, n), where, and whether tokens and logits are equal there (a step either side
// lacks, or logits of different lengths, count as +inf and unequal).
struct StepsCompared {
  double worst = 0.0;
  std::size_t at = 0;
  bool equal = true;
};
StepsCompared compare_steps(const analysis::PairedRun& run, std::size_t n) {
  StepsCompared c;
  for (std::size_t t = 0; t < n; ++t) {
    const bool have = t < run.logits_on.size() && t < run.logits_off.size() && t < run.tokens_on.size() &&
                      t < run.tokens_off.size() && run.logits_on[t].size() == run.logits_off[t].size();
    const double d =
        have ? analysis::max_abs_diff(run.logits_on[t], run.logits_off[t]) : std::numeric_limits<double>::infinity();
    if (d > c.worst) c.worst = d, c.at = t;
    c.equal = c.equal && have && run.logits_on[t] == run.logits_off[t] && run.tokens_on[t] == run.tokens_off[t];
  }
  return c;
}

}  // namespace

CheckResult scenario_path_rule(const std::string& scenario, const std::string& label_a,
                               const std::vector<CallRecord>& a, const std::string& label_b,
                               const std::vector<CallRecord>& b, const ExpectedCalls& want, std::uint64_t seed) {
  std::string diff = first_difference(label_a, a, want.a);
  if (diff.empty()) diff = first_difference(label_b, b, want.b);
  return detail::bitwise_result("scenario_path", diff.empty() ? 0.0 : 1.0, seed,
                                diff.empty()
                                    ? scenario + ": " + std::to_string(a.size()) + " + " + std::to_string(b.size()) +
                                          " calls as the scenario makes them; side A starts " + calls_text(a, 0)
                                    : diff);
}

CheckResults scenario_bitwise_rules(Scenario s, std::size_t at_step, const std::string& bitwise_why,
                                    const analysis::PairedRun& run, std::uint64_t seed) {
  const std::string name = engine::scenario_name(s);
  CheckResults r;
  if (s == Scenario::refill || s == Scenario::restore) {
    const StepsCompared c = compare_steps(run, at_step);
    r.push_back(detail::bitwise_result("scenario_shared_steps_bitwise", c.equal ? 0.0 : std::max(c.worst, 1e-300), seed,
                                       name + ": steps 0.." + std::to_string(at_step) +
                                           " (before the event) are the same computation; max |dz| " +
                                           detail::num(c.worst)));
  }
  if (s == Scenario::restore || !bitwise_why.empty()) {
    const std::size_t T = std::max(run.tokens_on.size(), run.tokens_off.size());
    const StepsCompared c = compare_steps(run, T);
    r.push_back(detail::bitwise_result(
        "scenario_bitwise", c.equal ? 0.0 : std::max(c.worst, 1e-300), seed,
        name + " (" + (bitwise_why.empty() ? std::string("bitwise for every engine") : bitwise_why) +
            "): " + std::to_string(T) + " steps; max |dz| " + detail::num(c.worst) + " at step " +
            std::to_string(c.at) + (run.flip ? "; tokens differ from step " + std::to_string(*run.flip) : "")));
  }
  return r;
}

ExpectedCalls expected_calls(Scenario s, const engine::ScenarioOptions& so, std::size_t n, std::size_t shared,
                             std::size_t steps) {
  ExpectedCalls e;
  // Side B: cache-OFF recomputes everything at each step; every other scenario's side B is the plain cache-ON run.
  for (std::size_t t = 0; t < steps; ++t) {
    if (s == Scenario::cache)
      e.b.push_back({n + t, 0});
    else
      e.b.push_back(t == 0 ? CallRecord{n, 0} : CallRecord{1, n + t - 1});
  }
  // Side A: the prompt as the scenario feeds it, then one decode per step (refill: its prefill before step at_step).
  if (s == Scenario::prefix) {
    e.a.push_back({n - shared, shared});
  } else if (s == Scenario::chunked) {
    // The correct chunking (the hooks' default), whatever a planted fault does.
    for (const auto& [b, end] : engine::plain_scenario().chunks(n, so.chunk)) e.a.push_back({end - b, b});
  } else {
    e.a.push_back({n, 0});
  }
  for (std::size_t t = 1; t < steps; ++t) {
    if (s == Scenario::refill && t == so.at_step) e.a.push_back({n + t - 1, 0});
    e.a.push_back({1, n + t - 1});
  }
  return e;
}

engine::ScenarioOptions scenario_options(const std::vector<int>& prompt, const std::vector<int>& other,
                                         std::size_t steps) {
  engine::ScenarioOptions so;
  so.shared = std::max<std::size_t>(1, prompt.size() / 2);
  so.donor.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(so.shared));
  for (std::size_t i = 1; i < other.size(); ++i) so.donor.push_back(other[i]);
  if (so.donor.size() == so.shared) so.donor.push_back(prompt[0]);  // a donor longer than what it shares
  so.chunk = 4;
  so.at_step = std::max<std::size_t>(1, steps / 3);
  return so;
}

CheckResults check_scenario(engine::Context& ctx, engine::Context& ref, const std::vector<int>& prompt, Scenario s,
                            const engine::ScenarioOptions& so, const analysis::PairOptions& o, std::uint64_t seed,
                            const engine::ScenarioHooks* hooks, analysis::PairedRun* run_out) {
  engine::GenerateOptions go;
  go.steps = o.steps;
  go.sampler = o.sampler;
  go.keep_logits = true;
  const engine::ScenarioResult a = engine::run_scenario(ctx, prompt, s, so, go, hooks);
  const engine::ScenarioResult b = engine::run_reference(ctx, prompt, s, go);
  const std::string name = engine::scenario_name(s);
  CheckResults r;

  const std::size_t shared = s == Scenario::prefix ? engine::prefix_shared(prompt, so) : 0;
  const ExpectedCalls want = expected_calls(s, so, prompt.size(), shared, a.gen.tokens.size());
  r.push_back(scenario_path_rule(name, name + ": side A", a.calls, name + ": side B", b.calls, want, seed));

  analysis::PairOptions po = o;
  po.keep_logits = true;
  const analysis::PairedRun run = analysis::pair_of(analysis::Regime::free_running, prompt, a.gen, b.gen, po);
  const bool invariant = ctx.kernels().profile.cache_invariant;
  for (CheckResult& x : scenario_bitwise_rules(
           s, so.at_step,
           invariant ? "under " + ctx.kernels().profile.name + ", which claims cache_invariant" : std::string(), run,
           seed))
    r.push_back(std::move(x));
  if (s == Scenario::restore || invariant) {
    if (run_out) *run_out = run;
    return r;
  }
  for (CheckResult& x : flip_rules(
           run, prompt, o.sampler.strategy, [&ref](const std::vector<int>& seq) { return ref.recompute(seq); }, seed))
    r.push_back(std::move(x));
  if (run_out) *run_out = run;
  return r;
}

}  // namespace kvconf::conformance
