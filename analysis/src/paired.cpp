// Paired runs of one prompt through cache-ON and cache-OFF: free-running (each path feeds back its own tokens) and
// teacher-forced (both fed the same tokens), with per-step distribution metrics and optional per-layer drift.
#include "kvconf/analysis/paired.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvconf::analysis {
namespace {

using engine::CacheMode;
using engine::Context;
using HiddenRows = std::vector<std::vector<std::vector<float>>>;  // steps × (n_layers + 1) × (hidden)

engine::GenerateOptions options_for(Context& ctx, const PairOptions& o, HiddenRows* rows) {
  engine::GenerateOptions g;
  g.steps = o.steps;
  g.sampler = o.sampler;
  g.keep_logits = true;
  g.stop_at_eos = false;
  if (rows != nullptr) {
    g.forward.capture_hidden = true;
    // After each step, the last row of every hidden state of that call (the current position).
    g.hook = [&ctx, rows](std::size_t, std::span<const float>, int) {
      const engine::Trace& t = ctx.trace();
      const std::size_t h = ctx.model().config.hidden;
      std::vector<std::vector<float>> step;            // (n_layers + 1) × (hidden)
      for (const std::vector<float>& hl : t.hidden) {  // (rows, hidden)
        if (hl.size() != t.rows * h || t.rows == 0)
          throw std::logic_error("paired run: trace hidden state is not (rows, hidden)");
        step.emplace_back(hl.end() - static_cast<std::ptrdiff_t>(h), hl.end());
      }
      rows->push_back(std::move(step));
    };
  }
  return g;
}

// Per-step metrics over the steps both paths ran, and the flip index of the chosen tokens.
PairedRun pair(Regime regime, std::span<const int> prompt, engine::GenerateResult on, engine::GenerateResult off,
               const HiddenRows& hid_on, const HiddenRows& hid_off, const PairOptions& o) {
  PairedRun r;
  r.regime = regime;
  r.prompt.assign(prompt.begin(), prompt.end());
  r.tokens_on = std::move(on.tokens);
  r.tokens_off = std::move(off.tokens);
  r.flip = flip_index(r.tokens_on, r.tokens_off);
  const std::size_t n = std::min({on.logits.size(), off.logits.size(), r.tokens_on.size(), r.tokens_off.size()});
  for (std::size_t t = 0; t < n; ++t) {
    const std::vector<float>& a = on.logits[t];   // (vocab)
    const std::vector<float>& b = off.logits[t];  // (vocab)
    StepMetrics m;
    m.step = t;
    m.token_on = r.tokens_on[t];
    m.token_off = r.tokens_off[t];
    m.kl = kl_divergence(a, b);
    m.js = js_divergence(a, b);
    m.top_on = top2(a);
    m.top_off = top2(b);
    m.max_abs_logit_diff = max_abs_diff(a, b);
    if (o.layer_drift && t < hid_on.size() && t < hid_off.size()) {
      check_same_length("layer_drift", hid_on[t].size(), hid_off[t].size());
      for (std::size_t l = 0; l < hid_on[t].size(); ++l) m.layer_drift.push_back(drift(hid_on[t][l], hid_off[t][l]));
    }
    r.steps.push_back(std::move(m));
  }
  if (o.keep_logits) {
    r.logits_on = std::move(on.logits);
    r.logits_off = std::move(off.logits);
  }
  return r;
}

}  // namespace

PairedRun pair_of(Regime regime, std::span<const int> prompt, engine::GenerateResult on, engine::GenerateResult off,
                  const PairOptions& o) {
  PairOptions no_drift = o;
  no_drift.layer_drift = false;
  return pair(regime, prompt, std::move(on), std::move(off), {}, {}, no_drift);
}

PairedRun run_free(Context& on, Context& off, std::span<const int> prompt, const PairOptions& o) {
  HiddenRows hid_on, hid_off;
  engine::GenerateResult a =
      engine::generate(on, prompt, CacheMode::on, options_for(on, o, o.layer_drift ? &hid_on : nullptr));
  engine::GenerateResult b =
      engine::generate(off, prompt, CacheMode::off, options_for(off, o, o.layer_drift ? &hid_off : nullptr));
  return pair(Regime::free_running, prompt, std::move(a), std::move(b), hid_on, hid_off, o);
}

PairedRun run_teacher_forced(Context& on, Context& off, std::span<const int> prompt, std::span<const int> forced,
                             const PairOptions& o) {
  HiddenRows hid_on, hid_off;
  engine::GenerateResult a =
      engine::teacher_forced(on, prompt, forced, CacheMode::on, options_for(on, o, o.layer_drift ? &hid_on : nullptr));
  engine::GenerateResult b = engine::teacher_forced(off, prompt, forced, CacheMode::off,
                                                    options_for(off, o, o.layer_drift ? &hid_off : nullptr));
  return pair(Regime::teacher_forced, prompt, std::move(a), std::move(b), hid_on, hid_off, o);
}

}  // namespace kvconf::analysis
