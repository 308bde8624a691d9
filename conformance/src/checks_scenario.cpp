// The scenario rules (scenario_rules.hpp): the path each side took, the steps both sides share, bitwise where the
// scenario or the profile demands it, the near-tie rules otherwise.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include "checks_common.hpp"
#include "kvconf/analysis/metrics.hpp"
#include "kvconf/conformance/engine_checks.hpp"
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
         std::to_string(v[i].cached) +
         (v[i].batch_rows() != v[i].fed ? ", in a call of " + std::to_string(v[i].batch_rows()) + " rows" : "") + "}";
  return s.empty() ? "none" : s;
}

// " (step t)" when call `i` chose token t (a preempt's recompute included), " (before step t)" when it fed a prompt
// chunk or a refill before the call that chose token t; nothing without call_of_step.
std::string step_of(const std::vector<std::size_t>& call_of_step, std::size_t i) {
  for (std::size_t t = 0; t < call_of_step.size(); ++t) {
    if (call_of_step[t] == i) return " (step " + std::to_string(t) + ")";
    if (call_of_step[t] > i) return " (before step " + std::to_string(t) + ")";
  }
  return {};
}

// The first call where `have` and `want` differ, as text naming the call, the step it served and the fields
// (calls[i] fed, cached, batch) that differ; empty when they agree.
std::string first_difference(const std::string& side, const std::vector<CallRecord>& have,
                             const std::vector<CallRecord>& want, const std::vector<std::size_t>& steps) {
  for (std::size_t i = 0; i < std::max(have.size(), want.size()); ++i) {
    if (i >= have.size() || i >= want.size())
      return side + " call " + std::to_string(i) + step_of(steps, i) + ": " +
             (i >= have.size() ? "missing" : "one call more") + ": " + calls_text(have, i) +
             " where the scenario makes " + calls_text(want, i);
    std::string fields;
    const std::string f = "calls[" + std::to_string(i) + "]";
    if (have[i].fed != want[i].fed) fields += f + " fed " + std::to_string(have[i].fed) + " (expected " +
                                              std::to_string(want[i].fed) + ")";
    if (have[i].cached != want[i].cached)
      fields += (fields.empty() ? "" : ", ") + f + " cached " + std::to_string(have[i].cached) + " (expected " +
                std::to_string(want[i].cached) + ")";
    const bool both_alone = have[i].batch_rows() == have[i].fed && want[i].batch_rows() == want[i].fed;
    if (have[i].batch_rows() != want[i].batch_rows() && !both_alone)
      fields += (fields.empty() ? "" : ", ") + f + " batch " + std::to_string(have[i].batch_rows()) + " (expected " +
                (want[i].batch > want[i].fed ? "more than " + std::to_string(want[i].fed) + " rows: a batch"
                                             : std::to_string(want[i].batch_rows()) + ": alone") +
                ")";
    if (!fields.empty())
      return side + " call " + std::to_string(i) + step_of(steps, i) + ": " + fields + "; the calls " +
             calls_text(have, i) + " where the scenario makes " + calls_text(want, i);
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
                               const std::vector<CallRecord>& b, const ExpectedCalls& want, std::uint64_t seed,
                               const std::vector<std::size_t>& steps_a, const std::vector<std::size_t>& steps_b) {
  std::string diff = first_difference(label_a, a, want.a, steps_a);
  if (diff.empty()) diff = first_difference(label_b, b, want.b, steps_b);
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
  const engine::ScenarioInfo& info = engine::scenario_info(s);  // which bitwise rules apply: engine/scenarios.json
  if (info.bitwise_before_event) {
    const StepsCompared c = compare_steps(run, at_step);
    r.push_back(detail::bitwise_result("scenario_shared_steps_bitwise", c.equal ? 0.0 : std::max(c.worst, 1e-300), seed,
                                       name + ": the steps before step " + std::to_string(at_step) +
                                           " (the event's) are the same computation; max |dz| " +
                                           detail::num(c.worst)));
  }
  if (info.bitwise || !bitwise_why.empty()) {
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

KvRows kv_rows_of(const engine::KvCache& c, std::size_t head_dim) {
  KvRows r;
  r.kv_dim = c.kv_dim;
  r.head_dim = head_dim;
  for (std::size_t l = 0; l < c.k.size(); ++l) {
    r.k.emplace_back(c.k[l].data(), c.n * c.kv_dim);
    r.v.emplace_back(c.v[l].data(), c.n * c.kv_dim);
  }
  return r;
}

namespace {
// Each of the first `rows` rows' last call that fed it (null: none).
std::vector<const CallRecord*> computing_calls(const std::vector<CallRecord>& calls, std::size_t rows) {
  std::vector<const CallRecord*> c(rows, nullptr);
  for (const CallRecord& x : calls)
    for (std::size_t p = x.cached; p < x.cached + x.fed && p < rows; ++p) c[p] = &x;
  return c;
}
}  // namespace

std::vector<std::size_t> kv_row_calls(const std::vector<CallRecord>& calls, std::size_t rows) {
  std::vector<std::size_t> m(rows, 0);
  const auto c = computing_calls(calls, rows);
  for (std::size_t p = 0; p < rows; ++p) m[p] = c[p] ? c[p]->batch_rows() : 0;
  return m;
}

namespace {
// Whether equal path names for two row counts mean the same arithmetic: a path is numerics::dot's exact order for
// kvconf's own kernels, but a model of an undisclosed order for cuBLAS's (which may change with M: a GEMV for M = 1,
// split-K) and any order for a black box (libtorch, a plugin, Python): their names do not change with M whatever the
// library does.
bool names_the_arithmetic(const std::string& backend, const Order& order) {
  return backend != "cublas" && !std::holds_alternative<AnyOrder>(order);
}
}  // namespace

std::vector<int> kv_gate(const std::vector<CallRecord>& a, const std::vector<CallRecord>& b, std::size_t rows,
                         const kernels::NormKernel* norm, const kernels::GemmKernel* g, std::size_t kv_dim,
                         std::size_t hidden) {
  const auto ca = computing_calls(a, rows), cb = computing_calls(b, rows);
  // Same path for both row counts, and paths that say what the kernel computes.
  const auto same_paths = [&](std::size_t ma, std::size_t mb) {
    if (!norm || !g) return false;
    const kernels::NormPath na = norm->path({ma, hidden}), nb = norm->path({mb, hidden});
    const kernels::GemmPath ga = g->path({ma, kv_dim, hidden}), gb = g->path({mb, kv_dim, hidden});
    return na.name == nb.name && ga.name == gb.name && names_the_arithmetic(norm->info.backend, na.order) &&
           names_the_arithmetic(g->info.backend, ga.order);
  };
  std::vector<int> gate(rows, 0);
  for (std::size_t p = 0; p < rows; ++p) {
    if (!ca[p] || !cb[p]) continue;
    const CallRecord &x = *ca[p], &y = *cb[p];
    const std::size_t ma = x.batch_rows(), mb = y.batch_rows();
    if (x.fed == y.fed && x.cached == 0 && y.cached == 0 && ma == mb)
      gate[p] = 2;
    else if (ma == mb || same_paths(ma, mb))
      gate[p] = 1;
  }
  return gate;
}

CheckResult cached_kv_rule(const std::string& scenario, const KvRows& a, const KvRows& b, std::size_t rows,
                           const std::vector<int>& gate, const std::string& bitwise_demand, std::uint64_t seed,
                           const std::vector<std::vector<double>>& layer0_bound) {
  // Restoring bits must give the same bits, for every engine (as scenario_bitwise_rules demands of the logits).
  const std::string bitwise_why =
      scenario == "restore" ? std::string("restore: bitwise for every engine") : bitwise_demand;
  const std::size_t L = std::min(a.k.size(), b.k.size()), D = a.kv_dim;
  double gated = 0.0, max_k = 0.0, max_v = 0.0;
  std::size_t compared = 0, differing = 0, gated_rows = 0, all_layer_rows = 0, bounded_rows = 0;
  std::string first;
  // Layer 0 rows computed by different paths (layer0_bound): |ΔK|, |ΔV| within the sum of both sides' bounds.
  detail::Worst worst;
  std::string worst_at;
  std::size_t bounded = 0;
  if (a.kv_dim != b.kv_dim || a.k.size() != b.k.size())
    return detail::bitwise_result("cached_kv", 1.0, seed,
                                  scenario + ": the two caches have different shapes (" + std::to_string(a.k.size()) +
                                      " x " + std::to_string(a.kv_dim) + " vs " + std::to_string(b.k.size()) + " x " +
                                      std::to_string(b.kv_dim) + ")");
  for (std::size_t p = 0; p < rows && p < gate.size(); ++p) {
    gated_rows += gate[p] > 0, all_layer_rows += gate[p] > 1;
    bounded_rows += gate[p] == 0 && p < layer0_bound.size() && !layer0_bound[p].empty();
  }
  for (std::size_t l = 0; l < L; ++l)
    for (int side = 0; side < 2; ++side) {
      const std::span<const float> x = side ? a.v[l] : a.k[l], y = side ? b.v[l] : b.k[l];
      for (std::size_t i = 0; i < rows * D && i < x.size() && i < y.size(); ++i) {
        const double d = std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
        (side ? max_v : max_k) = std::max(side ? max_v : max_k, d);
        const std::size_t p = i / D;
        const int level = p < gate.size() ? gate[p] : 0;
        if (bitwise_why.empty() && l == 0 && level == 0 && p < layer0_bound.size() && !layer0_bound[p].empty()) {
          const double bound = layer0_bound[p][(side ? D : 0) + i % D];
          worst.add(bounded++, d, bound);
          if (worst.index == bounded - 1)
            worst_at = std::string(side ? "V" : "K") + " layer 0 row " + std::to_string(p) +
                       (a.head_dim ? " head " + std::to_string((i % D) / a.head_dim) : std::string()) + ": " +
                       detail::num(x[i]) + " vs " + detail::num(y[i]) + ", |d| " + detail::num(d) + " bound " +
                       detail::num(bound);
          continue;
        }
        if (bitwise_why.empty() && !(level == 2 || (level == 1 && l == 0))) continue;
        ++compared;
        if (std::bit_cast<std::uint32_t>(x[i]) == std::bit_cast<std::uint32_t>(y[i])) continue;
        gated = std::max(gated, std::max(d, 1e-300));
        if (differing++ == 0)
          first = std::string(side ? "V" : "K") + " layer " + std::to_string(l) + " row " + std::to_string(p) +
                  (a.head_dim ? " head " + std::to_string((i % D) / a.head_dim) : " column " + std::to_string(i % D)) +
                  ": " + detail::num(x[i]) + " (side A) vs " + detail::num(y[i]) + " (side B)";
      }
    }
  const std::string what =
      bitwise_why.empty()
          ? "layer 0, the " + std::to_string(gated_rows) + " of " + std::to_string(rows) +
                " rows both sides computed with the same arithmetic" +
                (all_layer_rows ? " (" + std::to_string(all_layer_rows) + " of them in every layer)" : std::string()) +
                ", bit for bit"
          : "every layer and row bit for bit (" + bitwise_why + ")";
  const std::string bounded_what =
      bounded ? "; layer 0 of the " + std::to_string(bounded_rows) +
                    " rows computed by different paths within both sides' projection bounds (layer0_kv_bound): " +
                    std::to_string(worst.failed) + " of " + std::to_string(bounded) + " values over, worst " + worst_at
              : std::string();
  const std::string detail_text =
      scenario + ": " + what + ": " +
      (differing ? std::to_string(differing) + " of " + std::to_string(compared) + " values differ, first " + first
                 : std::to_string(compared) + " values equal") +
      bounded_what + "; over all " + std::to_string(L) + " layers and " + std::to_string(rows) + " rows max |dK| " +
      detail::num(max_k) + ", max |dV| " + detail::num(max_v);
  if (differing || !bounded) return detail::bitwise_result("cached_kv", gated, seed, detail_text);
  return detail::bound_result("cached_kv", worst.error, worst.bound, seed, detail_text);
}

CheckResult cached_kv_format_rule(engine::KvFormat f, Format storage, const KvRows& a, const KvRows& b,
                                  std::size_t rows, std::size_t measured_rows, std::uint64_t seed) {
  const std::string fmt = engine::kv_format_name(f);
  if (a.kv_dim != b.kv_dim || a.k.size() != b.k.size() || a.k.empty())
    return detail::bitwise_result("cached_kv", 1.0, seed,
                                  "kv_dtype: the two caches have different shapes (" + std::to_string(a.k.size()) +
                                      " x " + std::to_string(a.kv_dim) + " vs " + std::to_string(b.k.size()) + " x " +
                                      std::to_string(b.kv_dim) + ")");
  const std::size_t D = a.kv_dim;
  const auto have = [&](std::span<const float> x) { return x.size() / D; };
  rows = std::min({rows, have(a.k[0]), have(b.k[0]), have(a.v[0]), have(b.v[0])});
  // Layer 0: side A's stored rows within the format's step of side B's (the exact values before the store).
  engine::QuantCheck worst;
  std::string worst_at;
  for (int side = 0; side < 2; ++side) {
    engine::QuantCheck c;
    engine::within_step(f, side ? b.v[0] : b.k[0], side ? a.v[0] : a.k[0], D, 0, rows, storage, c);
    if (c.elements && (worst.elements == 0 || c.worst_ratio > worst.worst_ratio)) {
      const std::size_t p = c.worst_at / D, col = c.worst_at % D;
      worst_at = std::string(side ? "V" : "K") + " layer 0 row " + std::to_string(p) +
                 (a.head_dim ? " head " + std::to_string(col / a.head_dim) : " column " + std::to_string(col)) + ": " +
                 detail::num(c.xq) + " (side A, " + fmt + ") vs " + detail::num(c.x) + " (side B), |d| " +
                 detail::num(c.err) + " bound " + detail::num(c.bound);
      const std::size_t n = worst.elements + c.elements;
      worst = c;
      worst.elements = n;
    } else {
      worst.elements += c.elements;
    }
  }
  // Every layer measured over the rows both sides hold of the tokens they share.
  double max_k = 0.0, max_v = 0.0;
  for (std::size_t l = 0; l < a.k.size(); ++l)
    for (int side = 0; side < 2; ++side) {
      const std::span<const float> x = side ? a.v[l] : a.k[l], y = side ? b.v[l] : b.k[l];
      for (std::size_t i = 0; i < measured_rows * D && i < x.size() && i < y.size(); ++i)
        (side ? max_v : max_k) =
            std::max(side ? max_v : max_k, std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
    }
  const std::string detail_text =
      "kv_dtype " + fmt + ": layer 0, the " + std::to_string(rows) +
      " rows both sides computed by the same call, within the format's step of side B's values "
      "(quantizer_within_step's bound): " +
      std::to_string(worst.elements) + " values, worst " + (worst.elements ? worst_at : "none") +
      "; measured over all " + std::to_string(a.k.size()) + " layers and " + std::to_string(measured_rows) +
      " rows: max |dK| " + detail::num(max_k) + ", max |dV| " + detail::num(max_v);
  if (worst.elements == 0) return detail::bitwise_result("cached_kv", 1.0, seed, detail_text + " (no row to compare)");
  return detail::bound_result("cached_kv", worst.err, worst.bound, seed, detail_text);
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
  // Side A: the prompt as the scenario feeds it, then one decode per step (refill: its prefill before step at_step;
  // preempt: step at_step's call is the recompute of the prompt and the at_step tokens so far, over an empty cache).
  // batch: the prompt in one call with every other prompt, then one row per sequence per call.
  std::size_t batch_prompt_rows = n;
  for (const auto& p : so.batch_with) batch_prompt_rows += p.size();
  const std::size_t batch_decode_rows = 1 + so.batch_with.size();
  if (s == Scenario::batch) {
    e.a.push_back({n, 0, batch_prompt_rows});
  } else if (s == Scenario::prefix) {
    e.a.push_back({n - shared, shared});
  } else if (s == Scenario::chunked) {
    // The correct chunking (the hooks' default), whatever a planted fault does.
    for (const auto& [b, end] : engine::plain_scenario().chunks(n, so.chunk)) e.a.push_back({end - b, b});
  } else {
    e.a.push_back({n, 0});
  }
  for (std::size_t t = 1; t < steps; ++t) {
    if (s == Scenario::refill && t == so.at_step) e.a.push_back({n + t - 1, 0});
    if (s == Scenario::preempt && t == so.at_step)
      e.a.push_back({n + t, 0});
    else
      e.a.push_back({1, n + t - 1, s == Scenario::batch ? batch_decode_rows : 0});
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
  // batch: two others, one longer than the prompt (the other prompt after it) and one shorter (the other prompt's
  // first third), so the prompt is neither the batch's longest nor its shortest.
  std::vector<int> longer = other;
  longer.insert(longer.end(), prompt.begin(), prompt.end());
  const std::size_t short_n = std::max<std::size_t>(1, std::min(other.size(), prompt.size()) / 3);
  so.batch_with = {longer, std::vector<int>(other.begin(), other.begin() + static_cast<std::ptrdiff_t>(short_n))};
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
  // kv_dtype keeps a narrower cache on purpose: no profile's invariance claim covers it.
  const bool invariant = ctx.kernels().profile.cache_invariant && s != Scenario::kv_dtype;
  const std::string bitwise_why =
      invariant ? "under " + ctx.kernels().profile.name + ", which claims cache_invariant" : std::string();
  for (CheckResult& x : scenario_bitwise_rules(s, so.at_step, bitwise_why, run, seed)) r.push_back(std::move(x));

  // The caches: the rows of the prompt and of the tokens both sides chose (before the first flip).
  const engine::ModelConfig& cfg = ctx.model().config;
  const std::size_t shared_steps = run.flip ? *run.flip : std::min(a.gen.tokens.size(), b.gen.tokens.size());
  const std::size_t rows = std::min({a.cache.n, b.cache.n, prompt.size() + shared_steps});
  if (s == Scenario::kv_dtype) {
    // The cache itself is judged (within the format's step of side B's, on the prompt's rows in layer 0); the
    // logits' effect is reported by the pair record (first flip, per-step KL, max |dz|), not judged by the near-tie
    // rules: a narrower cache is no rounding-sized difference.
    r.push_back(cached_kv_format_rule(so.kv_format, ctx.kernels().profile.storage, kv_rows_of(a.cache, cfg.head_dim),
                                      kv_rows_of(b.cache, cfg.head_dim), std::min(prompt.size(), rows), rows, seed));
    if (run_out) *run_out = run;
    return r;
  }
  const std::vector<int> gate =
      kv_gate(a.cache_calls, b.cache_calls, rows, ctx.kernels().norm, ctx.kernels().gemm, cfg.kv_dim(), cfg.hidden);
  // Layer 0 rows both sides computed, by different paths: bounded from the rows' embeddings (the engine's own, from
  // a prefill of the rows' tokens with capture_hidden; elementwise, so the same bits as either side's).
  std::vector<std::vector<double>> layer0_bound(rows);
  const std::vector<std::size_t> ma = kv_row_calls(a.cache_calls, rows), mb = kv_row_calls(b.cache_calls, rows);
  std::vector<std::size_t> bounded_rows;  // gate 0, and both sides computed the row
  for (std::size_t p = 0; p < rows; ++p)
    if (gate[p] == 0 && ma[p] && mb[p]) bounded_rows.push_back(p);
  if (bitwise_why.empty() && s != Scenario::restore && !bounded_rows.empty()) {
    std::vector<int> tokens(prompt.begin(), prompt.end());
    for (std::size_t t = 0; tokens.size() < rows; ++t) tokens.push_back(b.gen.tokens[t]);
    engine::ForwardOptions fo;
    fo.capture_hidden = true;
    ctx.reset();
    ctx.prefill(tokens, fo);
    const std::vector<float> x = ctx.trace().hidden.at(0);  // (rows, hidden)
    ctx.reset();
    for (std::size_t p : bounded_rows) {
      const auto row = std::span<const float>(x).subspan(p * cfg.hidden, cfg.hidden);
      std::vector<double> ba = layer0_kv_bound(ctx.model(), ctx.kernels(), row, p, ma[p]);
      const std::vector<double> bb = layer0_kv_bound(ctx.model(), ctx.kernels(), row, p, mb[p]);
      for (std::size_t e = 0; e < ba.size(); ++e) ba[e] = (ba[e] + bb[e]) * (1.0 + 0x1p-40);
      layer0_bound[p] = std::move(ba);
    }
  }
  r.push_back(cached_kv_rule(name, kv_rows_of(a.cache, cfg.head_dim), kv_rows_of(b.cache, cfg.head_dim), rows, gate,
                             bitwise_why, seed, layer0_bound));
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
