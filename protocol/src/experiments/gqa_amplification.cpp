// gqa_amplification (seed paper §2.4, §6.2 layer drift, §7.2, §7.6): does sharing K/V heads amplify the cache-ON /
// cache-OFF divergence, as the paper's correlated-broadcast argument says (one rounding error in a shared K/V head
// reaches all G query heads of its group at once, so layer-1 amplification should grow ∝ G)?
//
// Definition. From the pair's model (n_heads H, base n_kv B, head_dim d, hidden D) build one variant per sharing ratio
// G ∈ {1, 2, 4, 8, H/B, H} that divides H (gqa_sharing_ratios: the paper's powers of two, the model's own ratio and
// full sharing, so SmolLM2's 9 heads over 3 give G = 1, 3, 9), with n_kv' = H / G K/V heads; wk and wv are
// (n_kv'·d, D), everything else is the base model's:
//   n_kv' > B  "replicated": K/V head h' is base head h' / (n_kv'/B) (its d rows of wk and wv copied). The engine maps
//              q head h to K/V head h / G, so every q head sees exactly the K and V it saw before: the same function
//              (a GQA model is an MHA model with duplicated K/V heads); only the arithmetic's shape may differ.
//   n_kv' = B  "base": the model itself.
//   n_kv' < B  "pooled": K/V head h' is the element-wise mean of base heads [h'·p, (h'+1)·p), p = B / n_kv', computed
//   in
//              double and rounded (RNE) to the storage format: the uptraining conversion of the GQA paper (Ainslie et
//              al. 2023), without the uptraining, so a different function from the base.
// A G whose n_kv' is neither a multiple nor a divisor of B is skipped. The reference of a variant is
// engine::convert(variant, fp32) under the pair's fp32 reference kernels.
// Per variant, under the profile's kernels and the run's planted fault:
//   - the free-running pair (the protocol's sampler and steps): flip index and mean KL(p_on‖p_off);
//   - the pair teacher-forced on cache-OFF's tokens with layer drift: drift_l = mean over steps of ‖h_on − h_off‖₂ of
//     the last row of hidden[l] (hidden[1] after layer 0, hidden[2] after layer 1), and the layer-1 amplification
//     drift_2 / drift_1 (null when drift_1 = 0 or the model has one layer);
//   - rules gqa_<rule> from conformance::flip_rules on the variant's free run against its fp32 reference
//     (gqa_perturbation_rounding_sized, gqa_flip_consistency, gqa_flip_near_tie; "no_flip" dropped), skipped where
//     S = 0 (the fp32 reference profile: no rounding yardstick). The planted engine::Fault::gqa_modulo_decode (decode
//     maps q head h to K/V head h mod n_kv) is invisible at G = 1 and at n_kv' = 1 but breaks every 1 < n_kv' < H.
// Summary per (model, profile): one row per G; amplification = mean drift_2 / mean drift_1 over the pairs; plots of
// the measured amplification beside the paper's prediction (∝ G, normalised to the measured G = 1 value) and of the
// flip rate vs G.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "experiment.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "summary_util.hpp"

namespace kvconf::protocol::experiments {
using nlohmann::json;

// The variant of `base` with `n_kv` K/V heads (replicated or pooled as above). Internal to the library; declared again
// in tests/protocol/experiments_test.cpp, which checks it. Throws std::invalid_argument when n_kv does not divide
// n_heads or is neither a multiple nor a divisor of base's n_kv_heads.
engine::Model gqa_variant(const engine::Model& base, std::size_t n_kv);
// The sharing ratios G of the variants, ascending: those of {1, 2, 4, 8, H/B, H} that divide H and whose n_kv' = H / G
// is a multiple or a divisor of B. Internal; declared again in tests/protocol/experiments_test.cpp.
std::vector<std::size_t> gqa_sharing_ratios(std::size_t H, std::size_t B);

std::vector<std::size_t> gqa_sharing_ratios(std::size_t H, std::size_t B) {
  std::set<std::size_t> out;
  for (std::size_t G : {std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{8}, B ? H / B : 1, H}) {
    if (G == 0 || H % G != 0) continue;
    const std::size_t n_kv = H / G;
    if (n_kv % B != 0 && B % n_kv != 0) continue;
    out.insert(G);
  }
  return {out.begin(), out.end()};
}

engine::Model gqa_variant(const engine::Model& base, std::size_t n_kv) {
  const engine::ModelConfig& c = base.config;
  const std::size_t H = c.n_heads, B = c.n_kv_heads, d = c.head_dim, D = c.hidden;
  if (n_kv == 0 || H % n_kv != 0 || (n_kv % B != 0 && B % n_kv != 0))
    throw std::invalid_argument("gqa_variant: " + std::to_string(n_kv) + " K/V heads for " + std::to_string(H) +
                                " query heads and " + std::to_string(B) + " base K/V heads");
  engine::Model m = base;
  m.config.n_kv_heads = n_kv;
  const std::size_t head = d * D;                    // one K/V head's rows of wk / wv: (d, D)
  auto rebuild = [&](const std::vector<float>& w) {  // w: (B·d, D) -> (n_kv·d, D)
    std::vector<float> out(n_kv * head);
    if (n_kv >= B) {
      const std::size_t r = n_kv / B;
      for (std::size_t h = 0; h < n_kv; ++h)
        std::copy_n(w.begin() + static_cast<std::ptrdiff_t>((h / r) * head), head,
                    out.begin() + static_cast<std::ptrdiff_t>(h * head));
    } else {
      const std::size_t p = B / n_kv;
      for (std::size_t h = 0; h < n_kv; ++h)
        for (std::size_t i = 0; i < head; ++i) {
          double s = 0.0;
          for (std::size_t j = 0; j < p; ++j) s += double(w[(h * p + j) * head + i]);
          out[h * head + i] = static_cast<float>(round_to(base.storage, s / double(p)));
        }
    }
    return out;
  };
  for (engine::LayerWeights& l : m.layers) {
    l.wk = rebuild(l.wk);
    l.wv = rebuild(l.wv);
  }
  m.source = base.source + " (GQA variant: " + std::to_string(n_kv) + " K/V heads, " +
             (n_kv > B   ? "replicated"
              : n_kv < B ? "mean-pooled"
                         : "base") +
             ")";
  engine::validate(m);
  return m;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
json num_or_null(double x) { return std::isfinite(x) ? json(x) : json(); }

const char* kind_of(std::size_t n_kv, std::size_t base) {
  return n_kv > base ? "replicated" : n_kv < base ? "pooled" : "base";
}

json run(PairUnit& u, results::CheckResults& rules) {
  const engine::Model& base = u.ctx().model();
  const engine::ModelConfig& c = base.config;
  const std::size_t H = c.n_heads, B = c.n_kv_heads, L = c.n_layers;
  json d = {{"n_heads", H}, {"base_n_kv", B}, {"layers", L}};
  json vs = json::array();
  engine::ContextOptions co;
  co = engine::with_fault(u.plants().fault, co);
  for (std::size_t G : gqa_sharing_ratios(H, B)) {
    const std::size_t n_kv = H / G;
    const bool is_base = n_kv == B;
    // The variant and its fp32 copy (the base: the pair's own contexts and free run).
    std::optional<engine::Model> vm, vm32;
    std::optional<engine::Context> vc, vr;
    if (!is_base) {
      vm = gqa_variant(base, n_kv);
      vm32 = engine::convert(*vm, Format::fp32);
      vc.emplace(*vm, u.ctx().kernels(), co);
      vr.emplace(*vm32, u.ref().kernels());
    }
    engine::Context& ctx = is_base ? u.ctx() : *vc;
    engine::Context& ref = is_base ? u.ref() : *vr;
    analysis::PairOptions po = u.options();
    po.keep_logits = true;
    po.layer_drift = false;
    const analysis::PairedRun fr = is_base ? u.free() : analysis::run_free(ctx, ctx, u.prompt(), po);
    analysis::PairOptions tp = u.options();
    tp.keep_logits = false;
    tp.layer_drift = true;
    const analysis::PairedRun tf = analysis::run_teacher_forced(ctx, ctx, u.prompt(), fr.tokens_off, tp);
    std::vector<double> h1, h2;  // per step: ‖Δ‖₂ of the last row of hidden[1], hidden[2]
    for (const analysis::StepMetrics& s : tf.steps) {
      if (s.layer_drift.size() > 1) h1.push_back(s.layer_drift[1].l2);
      if (s.layer_drift.size() > 2) h2.push_back(s.layer_drift[2].l2);
    }
    const double m1 = mean(h1), m2 = mean(h2);
    const double amp = std::isfinite(m1) && std::isfinite(m2) && m1 > 0.0 ? m2 / m1 : kNaN;
    json v = {{"G", G},
              {"n_kv", n_kv},
              {"kind", kind_of(n_kv, B)},
              {"steps", fr.steps.size()},
              {"flip", fr.flip ? json(*fr.flip) : json()},
              {"mean_kl", fr.mean_kl()},
              {"drift_h1", num_or_null(m1)},
              {"drift_h2", num_or_null(m2)},
              {"amplification", num_or_null(amp)}};
    const std::string label =
        "G=" + std::to_string(G) + " (" + std::to_string(n_kv) + " K/V heads, " + kind_of(n_kv, B) + "): ";
    results::CheckResults r = conformance::flip_rules(
        fr, u.prompt(), po.sampler.strategy, [&ref](const std::vector<int>& seq) { return ref.recompute(seq); },
        u.seed());
    double S = kNaN;
    for (const results::CheckResult& x : r)
      if (x.rule == "perturbation_rounding_sized") S = x.bound / 2.0;
    v["S"] = num_or_null(S);
    vs.push_back(v);
    if (!(S > 0.0)) continue;  // the fp32 reference profile itself (S = 0): no rounding yardstick, no rule
    for (results::CheckResult& x : r) {
      if (x.rule == "no_flip") continue;
      x.rule = "gqa_" + x.rule;
      x.detail = label + x.detail;
      rules.push_back(x);
    }
  }
  d["variants"] = vs;
  return d;
}

struct PerG {
  std::size_t n_kv = 0;
  std::string kind;
  std::size_t pairs = 0, flips = 0;
  std::vector<double> kl, h1, h2;
};

void summarize(const Records& recs, results::ExperimentSummary& s) {
  s.columns = {"model  profile",
               "G (K/V heads)",
               "variant",
               "pairs",
               "flip rate",
               "mean KL",
               "mean drift hidden[1]",
               "mean drift hidden[2]",
               "layer-1 amplification"};
  const Groups g = group_by(recs, {"model", "profile"});
  results::ExperimentPlot amp_plot{"GQA: layer-1 amplification drift(hidden[2]) / drift(hidden[1]) vs G",
                                   "G = query heads per K/V head",
                                   "amplification",
                                   {}};
  results::ExperimentPlot flip_plot{"GQA: flip rate vs G", "G = query heads per K/V head", "flip rate", {}};
  for (const std::string& k : g.keys) {
    std::map<std::size_t, PerG> by_g;
    std::size_t rep_pairs = 0, rep_same = 0;  // replicated variants compared with the same pair's base
    for (const json* r : g.by_key.at(k)) {
      const json& vs = r->at("data").at("variants");
      const json* base = nullptr;
      for (const json& v : vs)
        if (v.at("kind") == "base") base = &v;
      for (const json& v : vs) {
        PerG& p = by_g[v.at("G").get<std::size_t>()];
        p.n_kv = v.at("n_kv").get<std::size_t>();
        p.kind = v.at("kind").get<std::string>();
        ++p.pairs;
        p.flips += !v.at("flip").is_null();
        p.kl.push_back(v.at("mean_kl").get<double>());
        if (!v.at("drift_h1").is_null()) p.h1.push_back(v.at("drift_h1").get<double>());
        if (!v.at("drift_h2").is_null()) p.h2.push_back(v.at("drift_h2").get<double>());
        if (p.kind == "replicated" && base) {
          ++rep_pairs;
          rep_same += v.at("flip") == base->at("flip") && v.at("mean_kl") == base->at("mean_kl") &&
                      v.at("drift_h1") == base->at("drift_h1") && v.at("drift_h2") == base->at("drift_h2");
        }
      }
    }
    results::ExperimentSeries measured{k + " measured", "line", {}, {}};
    results::ExperimentSeries predicted{k + " predicted ∝ G (paper §7.2)", "line", {}, {}};
    results::ExperimentSeries flips{k, "line", {}, {}};
    double amp1 = kNaN;
    std::string amps, preds;
    for (const auto& [G, p] : by_g) {
      const double m1 = mean(p.h1), m2 = mean(p.h2);
      const double amp = std::isfinite(m1) && std::isfinite(m2) && m1 > 0.0 ? m2 / m1 : kNaN;
      if (G == 1) amp1 = amp;
      const double rate = p.pairs ? double(p.flips) / double(p.pairs) : kNaN;
      measured.x.push_back(double(G)), measured.y.push_back(amp);
      predicted.x.push_back(double(G)), predicted.y.push_back(amp1 * double(G));
      flips.x.push_back(double(G)), flips.y.push_back(rate);
      amps += (amps.empty() ? "" : ", ") + ("G=" + std::to_string(G) + ": " + num(amp));
      preds += (preds.empty() ? "" : ", ") + num(amp1 * double(G));
      s.rows.push_back({k, std::to_string(G) + " (" + std::to_string(p.n_kv) + ")", p.kind, std::to_string(p.pairs),
                        pct(rate), num(mean(p.kl)), num(m1), num(m2), num(amp)});
    }
    amp_plot.series.push_back(measured);
    amp_plot.series.push_back(predicted);
    flip_plot.series.push_back(flips);
    std::string rep;
    if (rep_pairs == 0)
      rep = "there is no replicated variant (the base model is already MHA)";
    else if (rep_same == rep_pairs)
      rep =
          "replication (the same function with duplicated K/V heads) changes nothing: flips, KL and drift equal the "
          "base's in all " +
          std::to_string(rep_pairs) + " replicated runs";
    else
      rep = "replication (the same function with duplicated K/V heads) changes the result in " +
            std::to_string(rep_pairs - rep_same) + " of " + std::to_string(rep_pairs) +
            " replicated runs: the arithmetic's shape, not the function, moved it";
    s.findings.push_back(k + ": layer-1 amplification drift(hidden[2])/drift(hidden[1]) measured " + amps +
                         "; the correlated-broadcast argument (∝ G from the G=1 value) predicts " + preds + ". " + rep +
                         ".");
  }
  s.plots.push_back(amp_plot);
  s.plots.push_back(flip_plot);
}

}  // namespace

Experiment gqa_amplification() {
  return {"gqa_amplification", "GQA amplification (paper §7.2, §7.6)",
          "Does sharing each K/V head among more query heads (G = 1, 2, 4, 8; replicated or mean-pooled K/V heads, "
          "everything else fixed) amplify layer-1 drift and flips as the paper's correlated-broadcast argument "
          "predicts (∝ G)?",
          run, summarize};
}

}  // namespace kvconf::protocol::experiments
