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

std::size_t common_prefix(const std::vector<int>& a, const std::vector<int>& b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

std::string calls_text(const std::vector<CallRecord>& v, std::size_t from) {
  std::string s;
  for (std::size_t i = from; i < v.size() && i < from + 4; ++i)
    s += (s.empty() ? "" : " ") + std::string("{fed ") + std::to_string(v[i].fed) + ", cached " +
         std::to_string(v[i].cached) + "}";
  return s.empty() ? "none" : s;
}

// The first call where `have` and `want` differ, as text; empty when they agree.
std::string first_difference(const char* side, const std::vector<CallRecord>& have,
                             const std::vector<CallRecord>& want) {
  for (std::size_t i = 0; i < std::max(have.size(), want.size()); ++i) {
    const bool same =
        i < have.size() && i < want.size() && have[i].fed == want[i].fed && have[i].cached == want[i].cached;
    if (!same)
      return std::string(side) + " call " + std::to_string(i) + ": " + calls_text(have, i) + " where the scenario " +
             "makes " + calls_text(want, i);
  }
  return {};
}

}  // namespace

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

  const std::size_t shared =
      s == Scenario::prefix ? std::min(so.shared != 0 ? so.shared : common_prefix(prompt, so.donor), prompt.size() - 1)
                            : 0;
  const ExpectedCalls want = expected_calls(s, so, prompt.size(), shared, a.gen.tokens.size());
  std::string diff = first_difference("side A", a.calls, want.a);
  if (diff.empty()) diff = first_difference("side B", b.calls, want.b);
  r.push_back(detail::bitwise_result(
      "scenario_path", diff.empty() ? 0.0 : 1.0, seed,
      name + ": " +
          (diff.empty() ? std::to_string(a.calls.size()) + " + " + std::to_string(b.calls.size()) +
                              " calls as the scenario makes them; side A starts " + calls_text(a.calls, 0)
                        : diff)));

  analysis::PairOptions po = o;
  po.keep_logits = true;
  const analysis::PairedRun run = analysis::pair_of(analysis::Regime::free_running, prompt, a.gen, b.gen, po);
  // The largest |z_A − z_B| over steps [from, to) and where (+inf for logits of different lengths).
  auto worst_over = [&](std::size_t from, std::size_t to, std::size_t* at) {
    double w = 0.0;
    *at = from;
    for (std::size_t t = from; t < to && t < run.logits_on.size() && t < run.logits_off.size(); ++t) {
      const double d = run.logits_on[t].size() == run.logits_off[t].size()
                           ? analysis::max_abs_diff(run.logits_on[t], run.logits_off[t])
                           : std::numeric_limits<double>::infinity();
      if (d > w) w = d, *at = t;
    }
    return w;
  };
  const std::size_t T = std::min(run.logits_on.size(), run.logits_off.size());
  if (s == Scenario::refill || s == Scenario::restore) {
    std::size_t at = 0;
    const std::size_t upto = std::min(so.at_step, T);
    const double w = worst_over(0, upto, &at);
    r.push_back(detail::bitwise_result("scenario_shared_steps_bitwise", w, seed,
                                       name + ": steps 0.." + std::to_string(upto) +
                                           " (before the event) are the same computation; max |dz| " + detail::num(w)));
  }
  if (s == Scenario::restore || ctx.kernels().profile.cache_invariant) {
    std::size_t at = 0;
    const double w = worst_over(0, T, &at);
    const bool same = w == 0.0 && run.tokens_on == run.tokens_off && T == run.steps.size();
    r.push_back(detail::bitwise_result(
        "scenario_bitwise", same ? 0.0 : std::max(w, 1e-300), seed,
        name +
            (s == Scenario::restore ? " (bitwise for every engine)"
                                    : " under " + ctx.kernels().profile.name + " (claims cache_invariant)") +
            ": " + std::to_string(T) + " steps; max |dz| " + detail::num(w) + " at step " + std::to_string(at) +
            (run.flip ? "; tokens differ from step " + std::to_string(*run.flip) : "")));
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
