// report_tables: the tables of report.md and report.html from report.json (report_tables.hpp). Statistics that were
// not computed show "n/a (why)".
#include "report_tables.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

#include "paper_figures.hpp"
#include "report_json.hpp"

namespace kvconf::reports::detail {

namespace {

using nlohmann::json;

Table make_table(std::string id, std::string title, std::string note, std::vector<std::string> header) {
  Table t;
  t.id = std::move(id), t.title = std::move(title), t.note = std::move(note), t.header = std::move(header);
  return t;
}

std::string str(const json& j, const char* k) {
  return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
}

std::string na_text(const json& j) { return "n/a (" + j["na"].get<std::string>() + ")"; }

std::string interval_text(const json& j, bool as_pct = false) {
  if (is_na(j)) return na_text(j);
  auto f = [&](double x) { return as_pct ? pct(x) : fmt(x); };
  return f(num_at(j, "estimate")) + " [" + f(num_at(j, "lo")) + ", " + f(num_at(j, "hi")) + "]";
}

std::string p_text(const json& t) {
  if (is_na(t)) return na_text(t);
  return "p=" + fmt(num_at(t, "p_value"), 3);
}

std::string corr_text(const json& c) {
  if (is_na(c)) return na_text(c);
  return "r=" + fmt(num_at(c, "r"), 3) + " p=" + fmt(num_at(c, "p_value"), 3) +
         " n=" + std::to_string(c["n"].get<std::size_t>());
}

bool is_fp16(const std::string& profile) {
  return profile.find("fp16") != std::string::npos && profile.find("invariant") == std::string::npos;
}
bool is_fp32(const std::string& profile) { return profile.rfind("fp32", 0) == 0; }

std::string range_text(const std::vector<double>& v, bool as_pct) {
  if (v.empty()) return "n/a (no such condition)";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  auto f = [&](double x) { return as_pct ? pct(x) : fmt(x); };
  return (*lo == *hi ? f(*lo) : f(*lo) + "–" + f(*hi)) + " (" + std::to_string(v.size()) + " condition" +
         (v.size() == 1 ? "" : "s") + ")";
}

Table verdict_table(const json& r) {
  Table t = make_table(
      "verdicts", "Rule verdicts",
      "One JUnit test case each (junit.xml). Model rules per model×profile; kernel rules aggregated per kernel "
      "(every case is in junit.xml and report.json). Headroom = (threshold − measured) / threshold.",
      {"suite", "rule", "result", "measured", "threshold", "headroom", "detail"});
  std::map<std::string, std::array<std::size_t, 3>> kern;  // passed, failed, skipped
  std::map<std::string, double> kern_min_headroom;
  for (const auto& v : r["verdicts"]) {
    const std::string suite = str(v, "suite");
    const bool skipped = !str(v, "skipped").empty(), pass = v["pass"].get<bool>();
    if (suite.rfind("kernels.", 0) == 0) {
      auto& k = kern[suite];
      ++k[skipped ? 2 : pass ? 0 : 1];
      if (!skipped) {
        const double h = num_at(v, "headroom");
        auto it = kern_min_headroom.find(suite);
        if (it == kern_min_headroom.end() || h < it->second) kern_min_headroom[suite] = h;
      }
      if (pass || skipped) continue;  // failed kernel cases are listed one by one below the aggregate
    }
    t.rows.push_back({suite, str(v, "name"),
                      skipped ? "SKIP"
                      : pass  ? "pass"
                              : "FAIL",
                      skipped ? "" : fmt(num_at(v, "measured")), skipped ? "" : fmt(num_at(v, "threshold")),
                      skipped ? "" : fmt(num_at(v, "headroom"), 3), skipped ? str(v, "skipped") : str(v, "detail")});
    t.row_class.push_back(skipped ? "skip" : pass ? "" : "fail");
  }
  for (const auto& [suite, k] : kern) {
    const auto h = kern_min_headroom.find(suite);
    t.rows.push_back(
        {suite, "(all cases)", k[1] ? "FAIL" : "pass", "", "",
         h == kern_min_headroom.end() ? "" : fmt(h->second, 3) + " (min)",
         std::to_string(k[0]) + " passed, " + std::to_string(k[1]) + " failed, " + std::to_string(k[2]) + " skipped"});
    t.row_class.push_back(k[1] ? "fail" : "");
  }
  return t;
}

Table condition_table(const json& r) {
  Table t = make_table(
      "conditions", "Conditions (model × profile × strategy), free-running",
      "Mean KL(p_on‖p_off) per step in nats, mean over the pairs of each pair's mean; [seeded bootstrap 95% CI]. "
      "Accuracy on GSM8K prompts only; McNemar on paired correctness with Bonferroni and BH across conditions; "
      "Δacc = ON − OFF with its bootstrap 95% CI.",
      {"model", "profile", "strategy", "pairs", "diverged", "div. rate", "mean KL [95% CI]", "mean KL teacher-forced",
       "mean JS", "median flip", "acc ON", "acc OFF", "McNemar p (Bonf., BH)", "Δacc [95% CI]"});
  for (const auto& c : r["conditions"]) {
    const json& a = c["accuracy"];
    std::string on = "n/a", off = "n/a", mc = is_na(a) ? na_text(a) : "", delta = "n/a";
    if (!is_na(a)) {
      on = pct(num_at(a, "on")) + " of " + std::to_string(a["graded"].get<std::size_t>());
      off = pct(num_at(a, "off"));
      const json& m = a["mcnemar"];
      mc = is_na(m) ? na_text(m)
                    : fmt(num_at(m, "p_value"), 3) + " (" + fmt(num_at(m, "p_bonferroni"), 3) + ", " +
                          fmt(num_at(m, "p_bh"), 3) + ")" + (m["exact"].get<bool>() ? " exact" : "");
      delta = interval_text(a["delta_ci"], true);
    }
    t.rows.push_back({str(c, "model"), str(c, "profile"), str(c, "strategy"),
                      std::to_string(c["pairs"].get<std::size_t>()), std::to_string(c["diverged"].get<std::size_t>()),
                      pct(num_at(c, "divergence_rate")), interval_text(c["mean_kl"]),
                      interval_text(c["mean_kl_teacher"]),
                      is_na(c["mean_js"]) ? na_text(c["mean_js"]) : fmt(as_num(c["mean_js"])),
                      c["median_flip"].is_null() ? "–" : fmt(as_num(c["median_flip"])), on, off, mc, delta});
    t.row_class.push_back("");
  }
  return t;
}

Table statistics_table(const json& r) {
  Table t = make_table(
      "statistics", "Statistics per condition (seed paper §4.4, §6.2, §6.4)",
      "Welch's t: mean KL of the early-flip third vs the late-flip third of the diverged pairs. Correlations: "
      "flip index vs mean KL over diverged pairs; 'excl. 0' drops flips at step 0; 'partial' controls for the "
      "step-0 cache-OFF top-1/top-2 margin. Layer drift: Mann–Whitney U of teacher-forced l2 drift at hidden "
      "state l vs l−1 across pairs, BH-FDR across layers.",
      {"model", "profile", "strategy", "Welch early vs late", "Pearson", "Spearman", "Pearson excl. 0",
       "partial | margin₀", "layers amplifying (BH<0.05)"});
  for (const auto& c : r["conditions"]) {
    const json& w = c["early_vs_late_welch"];
    std::string welch = is_na(w)
                            ? na_text(w)
                            : "t=" + fmt(num_at(w, "statistic"), 3) + " " + p_text(w) + " (KL " +
                                  fmt(num_at(w, "early_mean_kl"), 3) + " vs " + fmt(num_at(w, "late_mean_kl"), 3) + ")";
    const json& fc = c["flip_kl_correlation"];
    const json& mw = c["layer_drift"]["mann_whitney"];
    std::string layers;
    if (is_na(mw)) {
      layers = na_text(mw);
    } else {
      std::size_t sig = 0, tested = 0;
      for (const auto& row : mw)
        if (row.contains("p_bh")) ++tested, sig += num_at(row, "p_bh") < 0.05;
      layers = std::to_string(sig) + " of " + std::to_string(tested);
    }
    t.rows.push_back({str(c, "model"), str(c, "profile"), str(c, "strategy"), welch, corr_text(fc["pearson"]),
                      corr_text(fc["spearman"]), corr_text(fc["pearson_excl_flip0"]),
                      corr_text(fc["partial_pearson_given_margin0"]), layers});
    t.row_class.push_back("");
  }
  return t;
}

Table paper_table(const json& r) {
  Table t = make_table(
      "paper", "Ours beside the paper",
      "The paper: 'The Illusion of Equivalence' (arXiv 2604.15409), LLaMA-2-7B, Mistral-7B-v0.3, Gemma-2-2B on 700 "
      "GSM8K problems × 5 seeds, FP16 on an H100. Ours: ranges over this report's conditions; 'fp16' = profiles "
      "whose name contains fp16 (invariant profiles aside), 'fp32' = profiles whose name starts with fp32.",
      {"figure", "paper", "source", "ours"});
  std::vector<double> rate16, kl16, on16, off16;
  std::size_t fp32_pairs = 0, fp32_div = 0, fp32_greedy = 0, fp32_greedy_div = 0;
  std::size_t mc_n = 0, mc_on_better = 0, mc_sig = 0, w_n = 0, w_early = 0, w_sig = 0, p_n = 0, p_neg = 0;
  std::size_t layers_sig = 0, layers_tested = 0;
  for (const auto& c : r["conditions"]) {
    const std::string prof = str(c, "profile");
    if (is_fp32(prof)) {
      fp32_pairs += c["pairs"].get<std::size_t>();
      fp32_div += c["diverged"].get<std::size_t>();
      if (str(c, "strategy") == "greedy")
        fp32_greedy += c["pairs"].get<std::size_t>(), fp32_greedy_div += c["diverged"].get<std::size_t>();
    }
    if (!is_fp16(prof)) continue;
    rate16.push_back(num_at(c, "divergence_rate"));
    if (!is_na(c["mean_kl"])) kl16.push_back(num_at(c["mean_kl"], "estimate"));
    const json& a = c["accuracy"];
    if (!is_na(a)) {
      on16.push_back(num_at(a, "on")), off16.push_back(num_at(a, "off"));
      if (!is_na(a["mcnemar"])) {
        ++mc_n;
        mc_on_better += num_at(a, "on") > num_at(a, "off");
        mc_sig += num_at(a["mcnemar"], "p_bonferroni") < 0.05;
      }
    }
    const json& w = c["early_vs_late_welch"];
    if (!is_na(w)) ++w_n, w_early += num_at(w, "statistic") > 0, w_sig += num_at(w, "p_value") < 0.05;
    const json& p = c["flip_kl_correlation"]["pearson"];
    if (!is_na(p)) ++p_n, p_neg += num_at(p, "r") < 0;
    const json& mw = c["layer_drift"]["mann_whitney"];
    if (!is_na(mw))
      for (const auto& row : mw)
        if (row.contains("p_bh")) ++layers_tested, layers_sig += num_at(row, "p_bh") < 0.05;
  }
  std::string ratio = "n/a (no Fp32KlRatio verdict applied)";
  {
    std::vector<std::string> parts;
    for (const auto& v : r["verdicts"])
      if (str(v, "name") == "Fp32KlRatio" && str(v, "skipped").empty())
        parts.push_back(str(v, "suite").substr(6) + ": ratio " + fmt(num_at(v, "measured"), 3));
    if (!parts.empty()) {
      ratio.clear();
      for (const auto& s : parts) ratio += (ratio.empty() ? "" : "; ") + s;
    }
  }
  auto frac = [](std::size_t k, std::size_t n, const std::string& what) {
    return n == 0 ? "n/a (no testable condition)" : std::to_string(k) + " of " + std::to_string(n) + " " + what;
  };
  const std::vector<std::string> ours = {
      range_text(rate16, true),
      range_text(kl16, false),
      range_text(on16, true),
      range_text(off16, true),
      mc_n ? frac(mc_on_better, mc_n, "graded fp16 conditions ON > OFF") + ", " + std::to_string(mc_sig) +
                 " Bonferroni-significant"
           : "n/a (no graded fp16 condition)",
      fp32_pairs ? pct(double(fp32_div) / double(fp32_pairs)) + " (" + std::to_string(fp32_div) + " of " +
                       std::to_string(fp32_pairs) + " pairs; greedy " + std::to_string(fp32_greedy_div) + " of " +
                       std::to_string(fp32_greedy) + ")"
                 : "n/a (no fp32 profile)",
      ratio,
      frac(w_early, w_n, "fp16 conditions with early > late") +
          (w_n ? ", " + std::to_string(w_sig) + " with p<0.05" : ""),
      frac(p_neg, p_n, "fp16 conditions negative"),
      layers_tested ? std::to_string(layers_sig) + " of " + std::to_string(layers_tested) +
                          " layer tests significant (fp16 conditions)"
                    : "n/a (no layer drift test)"};
  for (std::size_t i = 0; i < std::size(kPaperClaims); ++i) {
    t.rows.push_back({kPaperClaims[i].what, kPaperClaims[i].paper, kPaperClaims[i].source, ours[i]});
    t.row_class.push_back("");
  }
  return t;
}

Table paper_table1() {
  Table t = make_table(
      "paper-table1", "The paper's Table 1 (quoted)",
      "Divergence rate, mean KL with its 95% CI, and GSM8K accuracy of cache-ON and cache-OFF, FP16. † and ∗ as in "
      "the paper (significance marks of the McNemar test). The seed text lost the letter of the two top- "
      "strategies; they are listed in the paper's order.",
      {"model", "strategy", "div. rate", "mean KL", "KL 95% CI", "cache acc.", "no-cache acc."});
  for (const auto& row : kPaperTable1) {
    t.rows.push_back({row.model, row.strategy, row.div_rate, row.mean_kl, row.kl_ci, row.acc_on, row.acc_off});
    t.row_class.push_back("");
  }
  return t;
}

Table kernel_table(const json& r) {
  Table t =
      make_table("kernels", "Kernel cases",
                 "Rules passed per case; the worst rule by headroom with its error and bound; the measured cache-ON vs "
                 "cache-OFF difference (elements whose bits differ, max ulps) where the kind has one.",
                 {"kernel", "kind", "case", "n", "d", "rules passed", "worst rule", "error", "bound", "headroom",
                  "ON≠OFF", "max ulp", "skipped"});
  for (const auto& k : r["kernels"]) {
    const json& w = k["worst"];
    const json& o = k["on_off"];
    const bool skipped = !str(k, "skipped").empty();
    const bool fail = k["passed"].get<std::size_t>() < k["rules"].get<std::size_t>();
    t.rows.push_back(
        {str(k, "kernel"), str(k, "kind"), str(k, "case_id"), std::to_string(k["seq_len"].get<std::size_t>()),
         std::to_string(k["head_dim"].get<std::size_t>()),
         std::to_string(k["passed"].get<std::size_t>()) + "/" + std::to_string(k["rules"].get<std::size_t>()),
         w.is_null() ? "" : str(w, "rule"), w.is_null() ? "" : fmt(num_at(w, "error")),
         w.is_null() ? "" : fmt(num_at(w, "bound")), w.is_null() ? "" : fmt(num_at(w, "headroom"), 3),
         o.is_null() ? ""
                     : std::to_string(o["differing"].get<std::size_t>()) + "/" +
                           std::to_string(o["elements"].get<std::size_t>()),
         o.is_null() ? "" : fmt(num_at(o, "max_ulp"), 3), str(k, "skipped")});
    t.row_class.push_back(skipped ? "skip" : fail ? "fail" : "");
  }
  return t;
}

}  // namespace

std::string summary_line(const json& r) {
  const json& t = r["totals"];
  return std::to_string(t["verdicts"].get<std::size_t>()) +
         " rule verdicts: " + std::to_string(t["passed"].get<std::size_t>()) + " passed, " +
         std::to_string(t["failed"].get<std::size_t>()) + " failed, " +
         std::to_string(t["skipped"].get<std::size_t>()) + " skipped; " +
         std::to_string(t["pairs"].get<std::size_t>()) + " run pairs, " +
         std::to_string(t["kernel_cases"].get<std::size_t>()) + " kernel cases";
}

// One experiment of kvconf model --experiment: its question, findings and cost above its table.
Table experiment_table(const json& e) {
  Table t;
  t.id = "experiment-" + e.value("name", std::string());
  t.title = "Experiment " + e.value("name", std::string()) + ": " + e.value("title", std::string());
  t.note = e.value("question", std::string());
  for (const json& f : e["findings"]) t.note += " " + f.get<std::string>();
  const double spr = e["seconds_per_record"].is_null() ? NAN : as_num(e["seconds_per_record"]);
  char cost[96];
  std::snprintf(cost, sizeof cost, " Cost: %.3g s per run pair (%zu records).", spr,
                e.value("records", std::size_t{0}));
  t.note += cost;
  t.header = e["columns"].get<std::vector<std::string>>();
  for (const json& row : e["rows"]) t.rows.push_back(row.get<std::vector<std::string>>());
  return t;
}

std::vector<Table> report_tables(const json& r) {
  std::vector<Table> out;
  out.push_back(verdict_table(r));
  if (!r["conditions"].empty()) {
    out.push_back(condition_table(r));
    out.push_back(statistics_table(r));
    out.push_back(paper_table(r));
    out.push_back(paper_table1());
  }
  if (!r["kernels"].empty()) out.push_back(kernel_table(r));
  if (r.contains("experiments"))
    for (const json& e : r["experiments"]) out.push_back(experiment_table(e));
  return out;
}

}  // namespace kvconf::reports::detail
