// terminal_summary: the fixed-width table `kvconf run` and `kvconf report` print: conditions, model rules, kernel
// rules aggregated per kernel, and every failed verdict.
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

#include "kvconf/reports/report.hpp"
#include "report_json.hpp"

namespace kvconf::reports {

namespace {

std::string clip(const std::string& s, std::size_t w) { return s.size() <= w ? s : s.substr(0, w - 1) + "~"; }

std::string row(const std::vector<std::pair<std::string, int>>& cells) {
  std::string o;
  for (const auto& [text, w] : cells) {
    char b[512];
    const std::string t = clip(text, static_cast<std::size_t>(std::abs(w)));
    std::snprintf(b, sizeof b, w < 0 ? "%-*s " : "%*s ", std::abs(w), t.c_str());
    o += b;
  }
  while (!o.empty() && o.back() == ' ') o.pop_back();
  return o + "\n";
}

}  // namespace

std::string terminal_summary(const ReportInput& in, const std::vector<RuleVerdict>& v) {
  using detail::fmt;
  std::string o;
  if (!in.pairs.empty()) {
    std::map<std::string, std::vector<const results::RunPairRecord*>> cond;
    for (const auto& p : in.pairs) cond[p.model + "\t" + p.profile + "\t" + p.strategy].push_back(&p);
    o += row({{"model", -24},
              {"profile", -16},
              {"strategy", -8},
              {"pairs", 6},
              {"diverged", 8},
              {"rate", 7},
              {"mean KL", 10},
              {"acc ON", 7},
              {"acc OFF", 7}});
    for (const auto& [key, ps] : cond) {
      std::size_t div = 0, graded = 0, on = 0, off = 0;
      double kl = 0;
      for (const auto* p : ps) {
        div += p->free.flip.has_value();
        kl += p->free.mean_kl();
        if (p->gold) ++graded, on += p->correct_on, off += p->correct_off;
      }
      const auto t1 = key.find('\t'), t2 = key.find('\t', t1 + 1);
      o += row({{key.substr(0, t1), -24},
                {key.substr(t1 + 1, t2 - t1 - 1), -16},
                {key.substr(t2 + 1), -8},
                {std::to_string(ps.size()), 6},
                {std::to_string(div), 8},
                {detail::pct(double(div) / double(ps.size())), 7},
                {fmt(kl / double(ps.size()), 3), 10},
                {graded ? detail::pct(double(on) / double(graded)) : "n/a", 7},
                {graded ? detail::pct(double(off) / double(graded)) : "n/a", 7}});
    }
    o += "\n";
  }
  o += row({{"suite", -44}, {"rule", -22}, {"result", -6}, {"measured", 10}, {"threshold", 10}, {"headroom", 9}});
  struct Agg {
    std::size_t pass = 0, fail = 0, skip = 0;
    double min_headroom = INFINITY;
  };
  std::map<std::string, Agg> kernels;
  detail::VerdictCounts n;
  for (const auto& x : v) {
    n.add(x);
    if (x.suite.rfind("kernels.", 0) == 0) {
      Agg& a = kernels[x.suite];
      if (!x.skipped.empty())
        ++a.skip;
      else {
        ++(x.pass ? a.pass : a.fail);
        a.min_headroom = std::min(a.min_headroom, x.headroom);
      }
      continue;
    }
    o += row({{x.suite, -44},
              {x.name, -22},
              {x.skipped.empty() ? (x.pass ? "pass" : "FAIL") : "skip", -6},
              {x.skipped.empty() ? fmt(x.measured, 3) : "", 10},
              {x.skipped.empty() ? fmt(x.threshold, 3) : "", 10},
              {x.skipped.empty() ? fmt(x.headroom, 3) : "", 9}});
  }
  for (const auto& [suite, a] : kernels)
    o += row(
        {{suite, -44},
         {std::to_string(a.pass + a.fail) + " rules" + (a.skip ? ", " + std::to_string(a.skip) + " skip" : ""), -22},
         {a.fail ? "FAIL" : "pass", -6},
         {std::to_string(a.fail) + " fail", 10},
         {"", 10},
         {std::isfinite(a.min_headroom) || std::isinf(a.min_headroom) ? fmt(a.min_headroom, 3) : "", 9}});
  if (n.failed > 0) {
    o += "\nfailed:\n";
    for (const auto& x : v)
      if (x.skipped.empty() && !x.pass) o += "  " + x.suite + " " + x.name + ": " + x.detail + "\n";
  }
  o += "\n" + std::to_string(v.size()) + " rule verdicts: " + std::to_string(n.passed) + " passed, " +
       std::to_string(n.failed) + " failed, " + std::to_string(n.skipped) + " skipped\n";
  return o;
}

}  // namespace kvconf::reports
