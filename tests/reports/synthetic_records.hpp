// Synthetic run-pair and kernel-case records for the report tests and the sample report: built field by field, so
// each test knows what every rule must conclude without running a model.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/results/records.hpp"

namespace kvconf::test {

// A pair of `steps` decode steps. flip: first differing step (none: identical tokens). kl_before: the per-step KL
// before the flip (rounding-sized), kl_after after it (the contexts differ). near_tie_ratio: (|Δa|+|Δb|)/(4·S) of
// the flip_near_tie rule (> 1 fails it).
inline results::RunPairRecord synthetic_pair(const std::string& model, const std::string& profile,
                                             const std::string& strategy, std::uint64_t seed, const std::string& prompt,
                                             std::size_t steps, std::optional<std::size_t> flip, double kl_before,
                                             double kl_after, double near_tie_ratio = 0.5) {
  results::RunPairRecord r;
  r.model = model, r.profile = profile, r.strategy = strategy, r.prompt_id = prompt, r.seed = seed;
  r.max_new_tokens = steps;
  r.prompt_tokens = 12;
  for (auto* reg : {&r.free, &r.teacher}) {
    for (std::size_t s = 0; s < steps; ++s) {
      const bool after = reg == &r.free && flip && s > *flip;
      const int t = static_cast<int>(100 + s);
      reg->tokens_on.push_back(t);
      reg->tokens_off.push_back(flip && reg == &r.free && s >= *flip ? t + 1 : t);
      const double kl = after ? kl_after * (1.0 + 0.1 * double(s % 3)) : kl_before;
      reg->kl.push_back(kl);
      reg->js.push_back(kl / 4);
      reg->margin_on.push_back(flip && s == *flip ? 0.01 : 1.5);
      reg->margin_off.push_back(flip && s == *flip ? 0.02 : 1.5);
      reg->max_abs_logit_diff.push_back(kl > 0 ? std::sqrt(kl) : 0.0);
    }
  }
  r.free.flip = flip;
  const double drift0 = kl_before > 0 ? 1e-3 : 0.0;
  for (std::size_t l = 0; l < 4; ++l) {
    r.layer_drift_l2.push_back(drift0 * std::pow(3.0, double(l)) * (1.0 + 0.01 * double(seed)));
    r.layer_cosine.push_back(1.0 - drift0 * double(l));
  }
  results::CheckResult pert;
  pert.rule = "perturbation_rounding_sized", pert.pass = true, pert.error = 0.1, pert.bound = 0.4;
  pert.headroom = 0.75, pert.seed = seed;
  r.rules.push_back(pert);
  if (flip) {
    results::CheckResult c;
    c.rule = "flip_consistency", c.pass = true, c.error = 0.02, c.bound = 0.05, c.headroom = 0.6, c.seed = seed;
    r.rules.push_back(c);
    results::CheckResult t;
    t.rule = "flip_near_tie", t.error = near_tie_ratio * 0.8, t.bound = 0.8, t.seed = seed;
    t.pass = t.error <= t.bound;
    t.headroom = (t.bound - t.error) / t.bound;
    t.detail = "a=101 b=102";
    r.rules.push_back(t);
  } else {
    results::CheckResult n;
    n.rule = "no_flip", n.pass = true, n.headroom = 1.0, n.seed = seed;
    r.rules.push_back(n);
  }
  r.gold = "42";
  r.answer_on = (seed + prompt.size()) % 3 == 0 ? "42" : "7";
  r.answer_off = (seed + prompt.size()) % 4 == 0 ? "42" : "8";
  r.correct_on = *r.answer_on == *r.gold;
  r.correct_off = *r.answer_off == *r.gold;
  r.seconds = 0.25;
  return r;
}

inline results::KernelCaseRecord synthetic_kernel(const std::string& kernel, const std::string& kind, std::size_t n,
                                                  std::size_t d, double error_over_bound,
                                                  const std::string& skipped = "") {
  results::KernelCaseRecord k;
  k.kernel = kernel, k.kind = kind, k.seq_len = n, k.head_dim = d, k.skipped = skipped;
  k.case_id = "f16_acc32_n" + std::to_string(n) + "_d" + std::to_string(d);
  if (skipped.empty()) {
    results::CheckResult o;
    o.rule = "oracle_bound", o.bound = 1e-3 * double(d ? d : 64) / 64.0, o.error = error_over_bound * o.bound;
    o.pass = o.error <= o.bound, o.headroom = (o.bound - o.error) / o.bound, o.seed = n * 1000 + d;
    o.detail = "worst element 3";
    k.rules.push_back(o);
    results::CheckResult b;
    b.rule = "on_off_bound", b.bound = 2e-3, b.error = 1e-4, b.pass = true, b.headroom = 0.95, b.seed = o.seed;
    k.rules.push_back(b);
    results::OnOffDiff diff;
    diff.elements = d, diff.differing = d / 8, diff.max_ulp = 1, diff.max_abs = 1e-4, diff.max_rel = 1e-4;
    diff.paths = "decode|prefill";
    k.on_off = diff;
  }
  k.seconds = 0.01;
  return k;
}

}  // namespace kvconf::test
