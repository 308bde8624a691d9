// report_json: the versioned report.json (schema kvconf.report/1, docs/REPORTS.md): per model×profile×strategy
// condition summaries with the statistics of the seed paper's §4.4 and §6 (analysis/stats.hpp), the kernel table,
// the oracle error points of the plots, and the rule verdicts. A statistic that cannot be computed is {"na": why}.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "kvconf/analysis/stats.hpp"
#include "kvconf/reports/report.hpp"
#include "report_json.hpp"

namespace kvconf::reports {

namespace {

using detail::na;
using detail::num;
using nlohmann::json;
using results::RunPairRecord;

constexpr std::size_t kResamples = 2000;    // bootstrap resamples per interval
constexpr double kZ95 = 1.959963984540054;  // standard normal 97.5% quantile (per-step KL band)

// FNV-1a 64 of a label: the bootstrap seed of each interval, so a report does not depend on condition order.
std::uint64_t seed_of(const std::string& label) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : label) h = (h ^ c) * 1099511628211ull;
  return h;
}

json interval_json(const analysis::Interval& iv, std::size_t resamples, std::uint64_t seed) {
  return {{"estimate", num(iv.estimate)}, {"lo", num(iv.lo)}, {"hi", num(iv.hi)}, {"level", iv.level},
          {"resamples", resamples},       {"seed", seed}};
}

json test_json(const analysis::TestResult& t) {
  return {{"statistic", num(t.statistic)}, {"p_value", num(t.p_value)}, {"df", num(t.df)}, {"exact", t.exact}};
}

json corr_json(const analysis::Correlation& c) { return {{"r", num(c.r)}, {"p_value", num(c.p_value)}, {"n", c.n}}; }

// Runs a statistic; too few values, zero variance or any invalid_argument from analysis/ gives {"na": why}.
template <class F>
json guarded(std::size_t n, std::size_t min_n, const std::string& what, F f) {
  if (n < min_n) return na("needs at least " + std::to_string(min_n) + " " + what + ", have " + std::to_string(n));
  try {
    json j = f();
    for (const char* k : {"p_value", "r", "statistic", "estimate"})
      if (j.contains(k) && !std::isfinite(detail::as_num(j[k])))
        return na(std::string(k) + " is not finite (zero variance or all values tied)");
    return j;
  } catch (const std::exception& e) {
    return na(e.what());
  }
}

json per_step(const std::vector<const RunPairRecord*>& pairs, bool teacher) {
  std::size_t steps = 0;
  for (const auto* p : pairs) steps = std::max(steps, (teacher ? p->teacher : p->free).kl.size());
  json mean = json::array(), lo = json::array(), hi = json::array(), n = json::array();
  for (std::size_t s = 0; s < steps; ++s) {
    double sum = 0, sq = 0;
    std::size_t k = 0;
    for (const auto* p : pairs) {
      const auto& kl = (teacher ? p->teacher : p->free).kl;
      if (s < kl.size() && std::isfinite(kl[s])) sum += kl[s], sq += kl[s] * kl[s], ++k;
    }
    const double m = k ? sum / static_cast<double>(k) : 0.0;
    const double var = k > 1 ? std::max(0.0, (sq - static_cast<double>(k) * m * m) / static_cast<double>(k - 1)) : 0.0;
    const double half = k > 1 ? kZ95 * std::sqrt(var / static_cast<double>(k)) : 0.0;
    mean.push_back(num(m));
    lo.push_back(num(std::max(0.0, m - half)));
    hi.push_back(num(m + half));
    n.push_back(k);
  }
  return {{"mean", mean}, {"lo", lo}, {"hi", hi}, {"n", n}};
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

json flip_statistics(const std::vector<const RunPairRecord*>& pairs) {
  std::vector<double> flip, kl, margin0;
  for (const auto* p : pairs)
    if (p->free.flip) {
      flip.push_back(static_cast<double>(*p->free.flip));
      kl.push_back(p->free.mean_kl());
      margin0.push_back(p->free.margin_off.empty() ? NAN : p->free.margin_off[0]);
    }
  json out;
  // Welch's t, early vs late flips (paper §5.2 "Decision Boundary Analysis": bottom vs top third of flip index).
  {
    std::vector<double> sorted = flip;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size(), third = (n + 2) / 3;
    json w;
    if (n < 4) {
      w = na("needs at least 4 diverged pairs (2 per third), have " + std::to_string(n));
    } else {
      const double early_max = sorted[third - 1], late_min = sorted[n - third];
      std::vector<double> early, late;
      for (std::size_t i = 0; i < flip.size(); ++i) {
        if (flip[i] <= early_max) early.push_back(kl[i]);
        if (flip[i] >= late_min) late.push_back(kl[i]);
      }
      if (early_max >= late_min) {
        w = na("flip indices do not separate into early and late thirds (33rd percentile " + detail::fmt(early_max) +
               " >= 67th percentile " + detail::fmt(late_min) + ")");
      } else {
        w = guarded(std::min(early.size(), late.size()), 2, "pairs per group", [&] {
          const auto t = analysis::welch_t(early, late);
          json j = test_json(t);
          j["early_n"] = early.size();
          j["late_n"] = late.size();
          j["early_max_flip"] = early_max;
          j["late_min_flip"] = late_min;
          j["early_mean_kl"] = num(std::accumulate(early.begin(), early.end(), 0.0) / double(early.size()));
          j["late_mean_kl"] = num(std::accumulate(late.begin(), late.end(), 0.0) / double(late.size()));
          return j;
        });
      }
    }
    out["early_vs_late_welch"] = w;
  }
  // Pearson / Spearman of flip index vs mean KL (paper §6.4, Table 3), and without the boundary flips at step 0.
  json c;
  c["pearson"] = guarded(flip.size(), 3, "diverged pairs", [&] { return corr_json(analysis::pearson(flip, kl)); });
  c["spearman"] = guarded(flip.size(), 3, "diverged pairs", [&] { return corr_json(analysis::spearman(flip, kl)); });
  std::vector<double> f1, k1;
  for (std::size_t i = 0; i < flip.size(); ++i)
    if (flip[i] > 0) f1.push_back(flip[i]), k1.push_back(kl[i]);
  c["pearson_excl_flip0"] =
      guarded(f1.size(), 3, "pairs flipping after step 0", [&] { return corr_json(analysis::pearson(f1, k1)); });
  c["spearman_excl_flip0"] =
      guarded(f1.size(), 3, "pairs flipping after step 0", [&] { return corr_json(analysis::spearman(f1, k1)); });
  // Partial correlation controlling for the decision-boundary proximity at step 0 (cache-OFF top-1/top-2 margin):
  // the paper's §6.4 explanation of the negative correlation.
  bool margins_ok = std::all_of(margin0.begin(), margin0.end(), [](double m) { return std::isfinite(m); });
  c["partial_pearson_given_margin0"] =
      margins_ok ? guarded(flip.size(), 4, "diverged pairs",
                           [&] { return corr_json(analysis::partial_pearson(flip, kl, margin0)); })
                 : na("a diverged pair has no step-0 margin");
  out["flip_kl_correlation"] = c;
  return out;
}

json layer_drift(const std::vector<const RunPairRecord*>& pairs) {
  std::size_t L = 0;
  for (const auto* p : pairs) L = std::max(L, p->layer_drift_l2.size());
  json out;
  if (L == 0) {
    out["mean_l2"] = json::array();
    out["mean_cosine"] = json::array();
    out["mann_whitney"] = na("no layer drift recorded");
    return out;
  }
  std::vector<std::vector<double>> by_layer(L);
  json mean = json::array(), cos = json::array();
  std::size_t complete = 0;
  for (const auto* p : pairs)
    if (p->layer_drift_l2.size() == L) {
      ++complete;
      for (std::size_t l = 0; l < L; ++l) by_layer[l].push_back(p->layer_drift_l2[l]);
    }
  for (std::size_t l = 0; l < L; ++l) {
    double s = 0, c = 0;
    std::size_t n = 0, nc = 0;
    for (const auto* p : pairs) {
      if (l < p->layer_drift_l2.size()) s += p->layer_drift_l2[l], ++n;
      if (l < p->layer_cosine.size()) c += p->layer_cosine[l], ++nc;
    }
    mean.push_back(num(n ? s / double(n) : NAN));
    cos.push_back(nc ? num(c / double(nc)) : json(nullptr));
  }
  out["mean_l2"] = mean;
  out["mean_cosine"] = cos;
  // Mann–Whitney U per hidden state l >= 1: drift at l vs at l−1 over the pairs (does layer l amplify the drift?),
  // BH-FDR across the layers (paper §4.4 "Layer drift significance", §6.2).
  if (L < 2 || complete < 2) {
    out["mann_whitney"] = na("needs at least 2 hidden states and 2 pairs with drift recorded, have " +
                             std::to_string(L) + " and " + std::to_string(complete));
    return out;
  }
  json rows = json::array();
  std::vector<double> ps;
  std::vector<std::size_t> at;
  for (std::size_t l = 1; l < L; ++l) {
    json r = guarded(complete, 2, "pairs",
                     [&] { return test_json(analysis::mann_whitney_u(by_layer[l], by_layer[l - 1])); });
    r["layer"] = l;
    if (!detail::is_na(r)) ps.push_back(detail::as_num(r["p_value"])), at.push_back(rows.size());
    rows.push_back(r);
  }
  if (!ps.empty()) {
    const auto bh = analysis::benjamini_hochberg(ps);
    for (std::size_t i = 0; i < at.size(); ++i) rows[at[i]]["p_bh"] = num(bh[i]);
  }
  out["mann_whitney"] = rows;
  return out;
}

json condition_json(const std::string& model, const std::string& profile, const std::string& strategy,
                    const std::vector<const RunPairRecord*>& pairs) {
  const std::string label = model + "|" + profile + "|" + strategy;
  json c = {{"model", model}, {"profile", profile}, {"strategy", strategy}, {"pairs", pairs.size()}};
  std::size_t diverged = 0;
  std::vector<double> kl, klt, js, flips;
  std::size_t max_new = 0;
  for (const auto* p : pairs) {
    if (p->free.flip) ++diverged, flips.push_back(static_cast<double>(*p->free.flip));
    kl.push_back(p->free.mean_kl());
    klt.push_back(p->teacher.mean_kl());
    if (!p->free.js.empty())
      js.push_back(std::accumulate(p->free.js.begin(), p->free.js.end(), 0.0) / double(p->free.js.size()));
    max_new = std::max(max_new, p->max_new_tokens);
  }
  c["diverged"] = diverged;
  c["divergence_rate"] = num(pairs.empty() ? 0.0 : double(diverged) / double(pairs.size()));
  c["max_new_tokens"] = max_new;
  c["mean_kl"] = guarded(kl.size(), 2, "pairs", [&] {
    const auto s = seed_of(label + "|mean_kl");
    return interval_json(analysis::bootstrap_mean_ci(kl, kResamples, s), kResamples, s);
  });
  c["mean_kl_teacher"] = guarded(klt.size(), 2, "pairs", [&] {
    const auto s = seed_of(label + "|mean_kl_teacher");
    return interval_json(analysis::bootstrap_mean_ci(klt, kResamples, s), kResamples, s);
  });
  c["mean_js"] =
      js.empty() ? na("no decode steps") : json(num(std::accumulate(js.begin(), js.end(), 0.0) / double(js.size())));
  std::sort(flips.begin(), flips.end());
  c["flip_indices"] = flips;
  c["mean_flip"] =
      flips.empty() ? json(nullptr) : json(std::accumulate(flips.begin(), flips.end(), 0.0) / double(flips.size()));
  c["median_flip"] = flips.empty() ? json(nullptr) : json(median_of(flips));
  // Accuracy ON/OFF on graded prompts (those with a GSM8K gold answer).
  std::vector<bool> on, off;
  for (const auto* p : pairs)
    if (p->gold) on.push_back(p->correct_on), off.push_back(p->correct_off);
  if (on.empty()) {
    c["accuracy"] = na("no graded prompts (prompt sets of token ids have no gold answer)");
  } else {
    const double n = double(on.size());
    json a = {{"graded", on.size()},
              {"on", double(std::count(on.begin(), on.end(), true)) / n},
              {"off", double(std::count(off.begin(), off.end(), true)) / n}};
    auto on_b = std::make_unique<bool[]>(on.size()), off_b = std::make_unique<bool[]>(on.size());
    std::copy(on.begin(), on.end(), on_b.get());
    std::copy(off.begin(), off.end(), off_b.get());
    a["mcnemar"] = guarded(on.size(), 1, "graded pairs", [&] {
      const auto m = analysis::mcnemar(std::span<const bool>(on_b.get(), on.size()),
                                       std::span<const bool>(off_b.get(), off.size()));
      json j = test_json(m.test);
      j["on_only"] = m.a_only;
      j["off_only"] = m.b_only;
      return j;
    });
    std::vector<double> on_d(on.begin(), on.end()), off_d(off.begin(), off.end());
    a["delta_ci"] = guarded(on.size(), 2, "graded pairs", [&] {
      const auto s = seed_of(label + "|accuracy_delta");
      return interval_json(analysis::bootstrap_paired_delta_ci(on_d, off_d, kResamples, s), kResamples, s);
    });
    c["accuracy"] = a;
  }
  const json flip_stats = flip_statistics(pairs);  // (a named object: items() of a temporary would dangle)
  for (const auto& [k, v] : flip_stats.items()) c[k] = v;
  c["layer_drift"] = layer_drift(pairs);
  c["kl_per_step"] = {{"free", per_step(pairs, false)}, {"teacher", per_step(pairs, true)}};
  return c;
}

// Bonferroni and BH over the conditions' McNemar p-values (paper §4.4: "Multiple comparisons are corrected using
// Bonferroni and BH-FDR").
void adjust_mcnemar(json& conditions) {
  std::vector<double> p;
  std::vector<json*> at;
  for (auto& c : conditions) {
    json& a = c["accuracy"];
    if (detail::is_na(a) || detail::is_na(a["mcnemar"])) continue;
    p.push_back(detail::as_num(a["mcnemar"]["p_value"]));
    at.push_back(&a["mcnemar"]);
  }
  if (p.empty()) return;
  const auto bon = analysis::bonferroni(p);
  const auto bh = analysis::benjamini_hochberg(p);
  for (std::size_t i = 0; i < at.size(); ++i) {
    (*at[i])["p_bonferroni"] = num(bon[i]);
    (*at[i])["p_bh"] = num(bh[i]);
    (*at[i])["comparisons"] = p.size();
  }
}

json kernel_row(const results::KernelCaseRecord& k) {
  json r = {{"kernel", k.kernel},     {"kind", k.kind},       {"case_id", k.case_id},     {"seq_len", k.seq_len},
            {"head_dim", k.head_dim}, {"skipped", k.skipped}, {"seconds", num(k.seconds)}};
  std::size_t passed = 0;
  const results::CheckResult* worst = nullptr;
  for (const auto& c : k.rules) {
    passed += c.pass;
    if (!worst || c.headroom < worst->headroom || (!c.pass && worst->pass)) worst = &c;
  }
  r["rules"] = k.rules.size();
  r["passed"] = passed;
  r["worst"] = worst ? json{{"rule", worst->rule},
                            {"pass", worst->pass},
                            {"error", num(worst->error)},
                            {"bound", num(worst->bound)},
                            {"headroom", num(worst->headroom)}}
                     : json(nullptr);
  r["on_off"] = k.on_off ? json{{"differing", k.on_off->differing},  {"elements", k.on_off->elements},
                                {"max_ulp", num(k.on_off->max_ulp)}, {"max_abs", num(k.on_off->max_abs)},
                                {"max_rel", num(k.on_off->max_rel)}, {"paths", k.on_off->paths}}
                         : json(nullptr);
  return r;
}

}  // namespace

// The experiments' summaries (kvconf model --experiment): what each found, its table and plot data, its cost.
json experiments_json(const std::vector<results::ExperimentSummary>& es) {
  json out = json::array();
  for (const results::ExperimentSummary& e : es) {
    json plots = json::array();
    for (const results::ExperimentPlot& p : e.plots) {
      json series = json::array();
      for (const results::ExperimentSeries& s : p.series) {
        json x = json::array(), y = json::array();
        for (double v : s.x) x.push_back(num(v));
        for (double v : s.y) y.push_back(num(v));
        series.push_back({{"name", s.name}, {"style", s.style}, {"x", x}, {"y", y}});
      }
      plots.push_back({{"title", p.title}, {"xlabel", p.xlabel}, {"ylabel", p.ylabel}, {"series", series}});
    }
    out.push_back({{"name", e.name},
                   {"title", e.title},
                   {"question", e.question},
                   {"findings", e.findings},
                   {"columns", e.columns},
                   {"rows", e.rows},
                   {"plots", plots},
                   {"records", e.records},
                   {"pairs", e.pairs},
                   {"seconds", num(e.seconds)},
                   {"seconds_per_record", e.records ? num(e.seconds / double(e.records)) : json(nullptr)}});
  }
  return out;
}

json report_json(const ReportInput& in, const std::vector<RuleVerdict>& v) {
  json r = {{"schema", kReportSchema}, {"title", in.title}, {"meta", in.meta.is_null() ? json::object() : in.meta}};
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<const RunPairRecord*>>>> g;
  for (const auto& p : in.pairs) g[p.model][p.profile][p.strategy].push_back(&p);
  json mps = json::array(), conditions = json::array();
  for (const auto& [model, profiles] : g)
    for (const auto& [profile, strategies] : profiles) {
      mps.push_back({{"model", model},
                     {"profile", profile},
                     {"suite", "model." + model + "." + profile},
                     {"dir", slug(model) + "__" + profile}});
      for (const auto& [strategy, pairs] : strategies)
        conditions.push_back(condition_json(model, profile, strategy, pairs));
    }
  adjust_mcnemar(conditions);
  r["model_profiles"] = mps;
  r["conditions"] = conditions;
  json kernels = json::array(), points = json::array();
  for (const auto& k : in.kernels) {
    kernels.push_back(kernel_row(k));
    for (const auto& c : k.rules)
      if (c.rule == "oracle_bound")
        points.push_back({{"kernel", k.kernel},
                          {"kind", k.kind},
                          {"case_id", k.case_id},
                          {"seq_len", k.seq_len},
                          {"head_dim", k.head_dim},
                          {"error", num(c.error)},
                          {"bound", num(c.bound)},
                          {"ratio", c.bound > 0 ? num(c.error / c.bound) : json(nullptr)}});
  }
  r["kernels"] = kernels;
  r["oracle_points"] = points;
  json verdicts = json::array();
  detail::VerdictCounts n;
  for (const auto& x : v) {
    json j = {{"suite", x.suite},
              {"name", x.name},
              {"pass", x.pass},
              {"measured", num(x.measured)},
              {"threshold", num(x.threshold)},
              {"headroom", num(x.headroom)},
              {"detail", x.detail},
              {"skipped", x.skipped}};
    verdicts.push_back(j);
    n.add(x);
  }
  r["verdicts"] = verdicts;
  r["experiments"] = experiments_json(in.experiments);
  r["totals"] = {{"verdicts", v.size()}, {"passed", n.passed},       {"failed", n.failed},
                 {"skipped", n.skipped}, {"pairs", in.pairs.size()}, {"kernel_cases", in.kernels.size()}};
  return r;
}

}  // namespace kvconf::reports
