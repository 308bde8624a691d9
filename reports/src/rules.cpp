// evaluate_rules: the conformance rules a report states as JUnit test cases (docs/REPORTS.md "Rules"). Model rules
// per model×profile from the run-pair records (conformance::evaluate_model_rules, the suites' implementation); kernel
// rules one per recorded CheckResult; experiment verdicts as their summaries state them.
#include <algorithm>

#include "kvconf/conformance/model_rules.hpp"
#include "kvconf/reports/report.hpp"

namespace kvconf::reports {

std::vector<RuleVerdict> evaluate_rules(const ReportInput& in) {
  std::vector<RuleVerdict> out = conformance::evaluate_model_rules(in.pairs);
  for (const auto& k : in.kernels) {
    const std::string suite = "kernels." + k.kernel;
    if (!k.skipped.empty()) {
      RuleVerdict v = results::rule_verdict(suite, k.case_id);
      v.pass = true;
      v.skipped = k.skipped;
      out.push_back(v);
      continue;
    }
    for (const auto& r : k.rules) {
      RuleVerdict v = results::rule_verdict(suite, r.rule + "/" + k.case_id);
      v.pass = r.pass;
      v.measured = r.error;
      v.threshold = r.bound;
      v.headroom = r.headroom;
      v.detail = r.detail + (r.detail.empty() ? "" : " ") + "seed=" + std::to_string(r.seed);
      out.push_back(v);
    }
  }
  for (const results::ExperimentSummary& e : in.experiments)
    for (const results::ExperimentVerdict& x : e.verdicts) {
      RuleVerdict v = results::rule_verdict(x.suite, x.result.rule);
      v.pass = x.result.pass;
      v.measured = x.result.error;
      v.threshold = x.result.bound;
      v.headroom = x.result.headroom;
      v.detail = "worst of " + std::to_string(x.records) + " records: " + x.result.detail;
      out.push_back(v);
    }
  std::stable_sort(out.begin(), out.end(), [](const RuleVerdict& a, const RuleVerdict& b) {
    return a.suite != b.suite ? a.suite < b.suite : a.name < b.name;
  });
  return out;
}

}  // namespace kvconf::reports
