// kv_patching (the seed paper's "most wanted" experiment, §7.6): does the divergence live in the KV cache?
// Teacher-forced on cache-OFF's tokens, before each decode step t >= 1 the cached rows [0, P+t−1) of cache-ON are
// replaced by the rows cache-OFF's recompute at step t computed (all layers K and V; K only; V only; one layer's K and
// V), then cache-ON decodes its new row itself. Recovery = 1 − D(patched)/D(cache-ON) as in residual_patching. What
// patching all rows cannot remove is the new row's own decode-shape arithmetic: one step's rounding, so the rule
// bounds it by cache-OFF's own rounding error (docs/EXPERIMENTS.md "kv_patching").
#include <cmath>
#include <limits>

#include "experiment.hpp"
#include "summary_util.hpp"

namespace kvconf::protocol::experiments {
using nlohmann::json;
namespace {

enum class Part { both, k, v };

json run(PairUnit& u, results::CheckResults& rules) {
  const analysis::PairedRun& f = u.free();
  const std::size_t L = u.ctx().model().config.n_layers, P = u.prompt().size();
  json d;
  d["layers"] = L;
  const std::vector<Logits>& off = f.logits_off;
  const std::size_t T = off.size();
  if (T < 2) {
    d["d_on"] = nullptr;
    return d;
  }
  // cache-OFF's rows at every decode step t (its recompute over prompt + tokens_off[0..t)).
  std::vector<engine::KvCache> off_cache(T);
  std::vector<int> seq = u.prompt();
  for (std::size_t t = 1; t < T; ++t) {
    seq.push_back(f.tokens_off[t - 1]);
    u.ctx().recompute(seq);
    off_cache[t] = u.ctx().last_recompute_cache();
  }
  auto patched = [&](std::size_t layer, Part part) {
    return cache_on_teacher_forced(
        u.ctx(), u.prompt(), f.tokens_off, [&](std::size_t t, engine::Context& c, engine::ForwardOptions&) {
          const std::size_t rows = P + t - 1;
          if (part == Part::both) return c.patch_cache(off_cache[t], layer, 0, rows);
          engine::KvCache src = off_cache[t];  // keep the other side's own rows: copy cache-ON's into the source
          for (std::size_t l = 0; l < L; ++l) {
            auto& keep = part == Part::k ? src.v[l] : src.k[l];
            const auto& own = part == Part::k ? c.cache().v[l] : c.cache().k[l];
            std::copy_n(own.begin(), rows * src.kv_dim, keep.begin());
          }
          c.patch_cache(src, layer, 0, rows);
        });
  };
  const double d_on = PairUnit::mean_kl(u.teacher_on(), off);
  d["d_on"] = d_on;
  auto recovery = [&](const std::vector<Logits>& z) {
    return d_on > 0.0 ? json(1.0 - PairUnit::mean_kl(z, off) / d_on) : json();
  };
  const std::vector<Logits> all = patched(engine::Context::npos, Part::both);
  d["recovery_all"] = recovery(all);
  d["recovery_k"] = recovery(patched(engine::Context::npos, Part::k));
  d["recovery_v"] = recovery(patched(engine::Context::npos, Part::v));
  json per_layer = json::array();
  for (std::size_t l = 0; l < L; ++l) per_layer.push_back(recovery(patched(l, Part::both)));
  d["recovery_layer"] = per_layer;

  // Rule: with every cached row patched, step t's remaining difference is the new row's decode arithmetic against
  // the recompute's: within 2·S_t, S_t = max_{s<=t} ‖z_off,s − z_fp32,s‖∞ (as FlipsAreNearTies'
  // perturbation_rounding_sized bounds one shared-context step).
  const std::vector<double>& S = u.S_off();
  double worst = -std::numeric_limits<double>::infinity(), err = 0.0, bound = 0.0, on_diff = 0.0;
  std::size_t worst_t = 0;
  for (std::size_t t = 1; t < T && t < S.size(); ++t) {
    double e = 0.0, e_on = 0.0;
    for (std::size_t i = 0; i < off[t].size(); ++i) {
      e = std::max(e, std::fabs(double(all[t][i]) - off[t][i]));
      e_on = std::max(e_on, std::fabs(double(u.teacher_on()[t][i]) - off[t][i]));
    }
    const double b = 2.0 * S[t];
    const double h = b > 0.0 ? (b - e) / b : (e == 0.0 ? 1.0 : -std::numeric_limits<double>::infinity());
    if (worst == -std::numeric_limits<double>::infinity() || h < worst)
      worst = h, err = e, bound = b, worst_t = t, on_diff = e_on;
  }
  if (S.empty() || S.back() == 0.0) return d;  // the fp32 reference profile itself: no yardstick (S = 0)
  results::CheckResult r;
  r.rule = "kv_patch_all_within_step_error";
  r.error = err;
  r.bound = bound;
  r.headroom = worst;
  r.pass = err <= bound;
  r.seed = u.seed();
  r.detail = "worst at step " + std::to_string(worst_t) +
             ": every cached row patched, max|z_patched - z_off| = " + num(err, 6) + " <= 2*S_t = " + num(bound, 6) +
             " (unpatched cache-ON: " + num(on_diff, 6) + ")";
  rules.push_back(r);
  return d;
}

void summarize(const Records& recs, results::ExperimentSummary& s) {
  s.columns = {"model  profile", "pairs with D>0", "all layers K+V: mean (min)",
               "K only",         "V only",         "best single layer (median)",
               "answer"};
  const Groups g = group_by(recs, {"model", "profile"});
  results::ExperimentPlot p{
      "KV patching: median recovery per layer (K and V of one layer)", "layer patched", "recovery", {}};
  for (const std::string& k : g.keys) {
    std::vector<double> all, kk, vv;
    std::vector<std::vector<double>> per_layer;
    for (const json* r : g.by_key.at(k)) {
      const json& d = r->at("data");
      if (d.at("d_on").is_null() || d.at("recovery_all").is_null()) continue;
      all.push_back(d.at("recovery_all").get<double>());
      kk.push_back(d.at("recovery_k").get<double>());
      vv.push_back(d.at("recovery_v").get<double>());
      const std::vector<double> pl = doubles(d.at("recovery_layer"));
      per_layer.resize(pl.size());
      for (std::size_t l = 0; l < pl.size(); ++l) per_layer[l].push_back(pl[l]);
    }
    results::ExperimentSeries line{k, "line", {}, {}};
    double best = -std::numeric_limits<double>::infinity();
    std::size_t best_l = 0;
    for (std::size_t l = 0; l < per_layer.size(); ++l) {
      const double m = median(per_layer[l]);
      line.x.push_back(static_cast<double>(l)), line.y.push_back(m);
      if (m > best) best = m, best_l = l;
    }
    p.series.push_back(line);
    double mn = std::numeric_limits<double>::infinity();
    for (double a : all) mn = std::min(mn, a);
    const std::string answer = all.empty()        ? "no divergence to recover"
                               : mean(all) >= 0.9 ? "yes: patching the cache recovers cache-OFF"
                               : mean(all) >= 0.5 ? "mostly"
                                                  : "no";
    s.rows.push_back({k, std::to_string(all.size()), all.empty() ? "n/a" : pct(mean(all)) + " (" + pct(mn) + ")",
                      pct(mean(kk)), pct(mean(vv)),
                      per_layer.empty() ? "n/a" : "layer " + std::to_string(best_l) + ": " + pct(best), answer});
    s.findings.push_back(k + ": patching every cached K/V row with cache-OFF's recovers a mean " + pct(mean(all)) +
                         " of the divergence (K only " + pct(mean(kk)) + ", V only " + pct(mean(vv)) + ") over " +
                         std::to_string(all.size()) + " pairs: " + answer + ".");
  }
  s.plots.push_back(p);
}

}  // namespace

Experiment kv_patching() {
  return {"kv_patching", "Direct KV-cache patching (paper §7.6)",
          "Does replacing cache-ON's cached K/V rows with cache-OFF's recover cache-OFF's distribution, i.e. does the "
          "divergence live in the cache?",
          run, summarize};
}

}  // namespace kvconf::protocol::experiments
