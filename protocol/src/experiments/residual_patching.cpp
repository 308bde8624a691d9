// residual_patching (seed paper §6.5): does the divergence live in the residual stream? Teacher-forced on cache-OFF's
// tokens, cache-ON's residual stream of the first decode step (step 1, the first that reads the cache) is replaced by
// cache-OFF's after one layer, or after every layer at once, and the run continues unpatched. Recovery =
// 1 − D(patched)/D(cache-ON), D = mean over steps of KL(p ‖ p_off) (docs/EXPERIMENTS.md): 1 recovers cache-OFF, 0 does
// nothing, negative moves further away.
#include <cmath>
#include <limits>

#include "experiment.hpp"
#include "summary_util.hpp"

namespace kvconf::protocol::experiments {
using nlohmann::json;
namespace {

constexpr std::size_t kPatchStep = 1;

json run(PairUnit& u, results::CheckResults& rules) {
  const analysis::PairedRun& f = u.free();
  json d;
  const std::size_t L = u.ctx().model().config.n_layers;
  d["layers"] = L;
  if (f.tokens_off.size() <= kPatchStep) {
    d["d_on"] = nullptr;
    return d;
  }
  // cache-OFF's residual stream of step 1's row: hidden[l + 1] after layer l, last row.
  std::vector<int> seq = u.prompt();
  seq.push_back(f.tokens_off[0]);
  engine::ForwardOptions cap;
  cap.capture_hidden = true;
  u.ctx().recompute(seq, cap);
  const std::size_t D = u.ctx().model().config.hidden;
  std::vector<std::vector<float>> off_rows;
  for (std::size_t l = 0; l < L; ++l) {
    const std::vector<float>& h = u.ctx().trace().hidden[l + 1];
    off_rows.emplace_back(h.end() - static_cast<std::ptrdiff_t>(D), h.end());
  }
  const std::vector<Logits>& off = f.logits_off;
  const double d_on = PairUnit::mean_kl(u.teacher_on(), off);
  d["d_on"] = d_on;
  auto patched = [&](std::size_t first, std::size_t last) {
    return cache_on_teacher_forced(u.ctx(), u.prompt(), f.tokens_off,
                                   [&](std::size_t step, engine::Context&, engine::ForwardOptions& fo) {
                                     if (step != kPatchStep) return;
                                     for (std::size_t l = first; l <= last; ++l) fo.patches.push_back({l, off_rows[l]});
                                   });
  };
  auto recovery = [&](const std::vector<Logits>& z) {
    return d_on > 0.0 ? json(1.0 - PairUnit::mean_kl(z, off) / d_on) : json();
  };
  json per_layer = json::array();
  for (std::size_t l = 0; l < L; ++l) per_layer.push_back(recovery(patched(l, l)));
  d["recovery"] = per_layer;
  const std::vector<Logits> all = patched(0, L - 1);
  d["recovery_all"] = recovery(all);
  // With every layer's residual row patched, step 1's logits are the final norm and LM head of cache-OFF's own final
  // residual row: the same row-wise arithmetic on the same values, so they must equal cache-OFF's bit for bit.
  double diff = 0.0;
  for (std::size_t i = 0; i < all[kPatchStep].size(); ++i)
    diff = std::max(diff, std::fabs(double(all[kPatchStep][i]) - off[kPatchStep][i]));
  results::CheckResult r;
  r.rule = "all_layers_patch_reproduces_step";
  r.pass = all[kPatchStep] == off[kPatchStep];
  r.error = diff;
  r.headroom = r.pass ? 1.0 : -std::numeric_limits<double>::infinity();
  r.seed = u.seed();
  r.detail = "step 1 with the residual stream of all " + std::to_string(L) +
             " layers patched: max|z_patched - z_off| = " + num(diff, 6) + " (must be 0)";
  rules.push_back(r);
  return d;
}

void summarize(const Records& recs, results::ExperimentSummary& s) {
  s.columns = {"model  profile", "pairs with D>0", "median recovery per layer (min .. max)", "mean recovery, one layer",
               "all layers: mean (median)"};
  const Groups g = group_by(recs, {"model", "profile"});
  results::ExperimentPlot p{"Residual patching: median recovery per layer", "layer patched", "recovery", {}};
  for (const std::string& k : g.keys) {
    std::vector<std::vector<double>> per_layer;
    std::vector<double> all, one;
    std::size_t used = 0;
    for (const json* r : g.by_key.at(k)) {
      const json& d = r->at("data");
      if (d.at("d_on").is_null() || !d.contains("recovery")) continue;
      const std::vector<double> rec = doubles(d.at("recovery"));
      if (rec.empty() || std::isnan(rec[0])) continue;
      ++used;
      per_layer.resize(rec.size());
      for (std::size_t l = 0; l < rec.size(); ++l) per_layer[l].push_back(rec[l]), one.push_back(rec[l]);
      all.push_back(doubles(json::array({d.at("recovery_all")}))[0]);
    }
    results::ExperimentSeries line{k, "line", {}, {}};
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (std::size_t l = 0; l < per_layer.size(); ++l) {
      const double m = median(per_layer[l]);
      line.x.push_back(static_cast<double>(l));
      line.y.push_back(m);
      lo = std::min(lo, m), hi = std::max(hi, m);
    }
    p.series.push_back(line);
    s.rows.push_back({k, std::to_string(used),
                      per_layer.empty() ? "n/a" : num(median(one)) + " (" + num(lo) + " .. " + num(hi) + ")",
                      pct(mean(one)), pct(mean(all)) + " (" + pct(median(all)) + ")"});
    s.findings.push_back(k + ": patching one layer's residual stream recovers a median " + pct(median(one)) +
                         " of the divergence, all layers at once a mean " + pct(mean(all)) +
                         " (paper: < 1% median, negative mean for all layers).");
  }
  s.plots.push_back(p);
}

}  // namespace

Experiment residual_patching() {
  return {"residual_patching", "Residual-stream patching (paper §6.5)",
          "Does replacing cache-ON's residual stream with cache-OFF's at the first decode step recover cache-OFF's "
          "distribution?",
          run, summarize};
}

}  // namespace kvconf::protocol::experiments
