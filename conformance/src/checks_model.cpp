// The model-level rules: prefill bitwise equality, near-tie flips (rule 3), invariant profiles bitwise
// (model_cases.hpp; derivations in docs/TOLERANCES.md "Model rules").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "kvconf/analysis/metrics.hpp"
#include "kvconf/conformance/model_cases.hpp"

namespace kvconf::conformance {
namespace {

CheckResult bitwise(const std::string& rule, bool equal, double diff, std::uint64_t seed, std::string detail) {
  CheckResult r;
  r.rule = rule;
  r.pass = equal;
  r.error = diff;
  r.bound = 0.0;
  r.headroom = equal ? 1.0 : -std::numeric_limits<double>::infinity();
  r.seed = seed;
  r.detail = std::move(detail);
  return r;
}

CheckResult within(const std::string& rule, double error, double bound, std::uint64_t seed, std::string detail) {
  CheckResult r;
  r.rule = rule;
  r.error = error;
  r.bound = bound;
  r.pass = std::isfinite(bound) && error <= bound;  // a vacuous bound checks nothing and fails
  r.headroom = bound > 0 ? (bound - error) / bound : (error == 0 && bound == 0 ? 0.0 : -1.0);
  r.seed = seed;
  r.detail = std::move(detail);
  return r;
}

// Largest |a − b| over two equally long vectors (+inf when the lengths differ).
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  return a.empty() ? 0.0 : analysis::max_abs_diff(a, b);
}

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

}  // namespace

CheckResults check_prefill_bitwise(engine::Context& ctx, const std::vector<int>& prompt, std::uint64_t seed) {
  engine::ForwardOptions o;
  o.capture_hidden = true;
  ctx.reset();
  const std::vector<float> on = ctx.prefill(prompt, o);
  const engine::Trace t_on = ctx.trace();
  const std::vector<float> off = ctx.recompute(prompt, o);
  const engine::Trace& t_off = ctx.trace();
  CheckResults r;
  r.push_back(bitwise("prefill_logits_bitwise", on == off, max_diff(on, off), seed,
                      "prompt of " + std::to_string(prompt.size()) + " tokens, cache capacity " +
                          std::to_string(ctx.cache().capacity) + " vs " + std::to_string(prompt.size())));
  double worst = 0.0;
  std::size_t worst_layer = 0;
  bool equal = t_on.hidden.size() == t_off.hidden.size();
  for (std::size_t l = 0; equal && l < t_on.hidden.size(); ++l) {
    const double d = max_diff(t_on.hidden[l], t_off.hidden[l]);
    if (d != 0.0 || t_on.hidden[l] != t_off.hidden[l]) equal = false;
    if (d > worst) worst = d, worst_layer = l;
  }
  r.push_back(bitwise("prefill_hidden_bitwise", equal, worst, seed,
                      "every row of " + std::to_string(t_on.hidden.size()) + " hidden states; worst at hidden[" +
                          std::to_string(worst_layer) + "]"));
  return r;
}

CheckResults flip_rules(const analysis::PairedRun& run, const std::vector<int>& prompt, engine::Strategy strategy,
                        const ReferenceLogits& z_ref_of, std::uint64_t seed) {
  // Steps 0..T−1 share their context in both paths (T = the flip step + 1, or every step): there the free run is the
  // teacher-forced run. S = the cache-OFF path's own rounding error against the fp32 evaluation of the same weights.
  const std::size_t T =
      std::min(run.flip ? *run.flip + 1 : run.steps.size(), std::min(run.logits_on.size(), run.logits_off.size()));
  std::vector<int> seq = prompt;
  double S = 0.0, worst_delta = 0.0;
  std::size_t worst_step = 0;
  std::vector<float> z_ref;  // at the last shared step (the flip step when there is one)
  for (std::size_t s = 0; s < T; ++s) {
    if (z_ref_of) {
      z_ref = z_ref_of(seq);
      S = std::max(S, max_diff(run.logits_off[s], z_ref));
    }
    const double d = max_diff(run.logits_on[s], run.logits_off[s]);
    if (d > worst_delta) worst_delta = d, worst_step = s;
    seq.push_back(run.tokens_off[s]);
  }
  CheckResults r;
  if (z_ref_of)
    r.push_back(within("perturbation_rounding_sized", worst_delta, 2.0 * S, seed,
                       fmt("max_v |z_on - z_off| = %.6g at step %.0f of %.0f shared-context steps; S = %.6g (cache-OFF "
                           "vs fp32, same weights)",
                           worst_delta, double(worst_step), double(T), S)));
  if (!run.flip) {
    r.push_back(within("no_flip", 0.0, 0.0, seed, std::to_string(run.steps.size()) + " steps, no divergence"));
    r.back().pass = true;
    r.back().headroom = 1.0;
    return r;
  }
  const std::size_t t = *run.flip;
  if (t >= T) return r;  // one path stopped early: a length difference, no logits to judge at the flip
  const int a = run.tokens_on[t], b = run.tokens_off[t];
  const std::vector<float>& z_on = run.logits_on[t];
  const std::vector<float>& z_off = run.logits_off[t];
  const double d_a = std::fabs(double(z_on[a]) - z_off[a]), d_b = std::fabs(double(z_on[b]) - z_off[b]);
  const std::string where =
      "flip at step " + std::to_string(t) + ": on picks " + std::to_string(a) + ", off picks " + std::to_string(b);
  if (strategy == engine::Strategy::greedy) {
    const double m = double(z_off[b]) - z_off[a];
    r.push_back(within("flip_consistency", m, d_a + d_b, seed,
                       where + fmt("; margin z_off[b]-z_off[a] = %.6g, |Δa| = %.6g, |Δb| = %.6g", m, d_a, d_b)));
  }
  if (z_ref_of) {
    const double e_on = max_diff(z_on, z_ref), e_off = max_diff(z_off, z_ref);
    r.push_back(within("flip_near_tie", d_a + d_b, 4.0 * S, seed,
                       where +
                           fmt("; |Δa|+|Δb| = %.6g, S = %.6g, off top-1/top-2 margin %.6g", d_a + d_b, S,
                               run.steps[t].top_off.margin) +
                           fmt("; at the flip max|z_on - z_fp32| = %.6g, max|z_off - z_fp32| = %.6g", e_on, e_off) +
                           (e_on < e_off   ? " (cache-ON closer)"
                            : e_off < e_on ? " (cache-OFF closer)"
                                           : " (equal)")));
  }
  return r;
}

CheckResults check_flips_are_near_ties(engine::Context& ctx, engine::Context& ref, const std::vector<int>& prompt,
                                       const analysis::PairOptions& o, std::uint64_t seed,
                                       analysis::PairedRun* run_out) {
  analysis::PairOptions po = o;
  po.keep_logits = true;
  analysis::PairedRun run = analysis::run_free(ctx, ctx, prompt, po);
  CheckResults r = flip_rules(
      run, prompt, o.sampler.strategy, [&ref](const std::vector<int>& seq) { return ref.recompute(seq); }, seed);
  if (run_out) *run_out = std::move(run);
  return r;
}

CheckResults check_invariant_model(engine::Context& ctx, const std::vector<int>& prompt, const analysis::PairOptions& o,
                                   std::uint64_t seed) {
  analysis::PairOptions po = o;
  po.keep_logits = true;
  const analysis::PairedRun run = analysis::run_free(ctx, ctx, prompt, po);
  CheckResults r;
  bool equal = run.tokens_on == run.tokens_off && run.logits_on.size() == run.logits_off.size();
  double worst = 0.0;
  std::size_t worst_step = 0;
  for (std::size_t s = 0; s < std::min(run.logits_on.size(), run.logits_off.size()); ++s) {
    const double d = max_diff(run.logits_on[s], run.logits_off[s]);
    if (run.logits_on[s] != run.logits_off[s]) equal = false;
    if (d > worst) worst = d, worst_step = s;
  }
  r.push_back(bitwise("decode_logits_bitwise", equal, worst, seed,
                      std::to_string(run.logits_on.size()) + " steps; worst at step " + std::to_string(worst_step)));
  ctx.reset();
  const std::vector<float> one = ctx.prefill(prompt);
  for (std::size_t chunk : {1u, 4u, 16u}) {
    engine::Context& c = ctx;
    c.reset();
    std::vector<float> last;
    for (std::size_t i = 0; i < prompt.size(); i += chunk)
      last = c.prefill(std::span<const int>(prompt).subspan(i, std::min(chunk, prompt.size() - i)));
    r.push_back(bitwise("chunked_prefill_bitwise", last == one, max_diff(last, one), seed,
                        "chunks of " + std::to_string(chunk) + " vs one shot"));
  }
  return r;
}

}  // namespace kvconf::conformance
