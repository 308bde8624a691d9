// all_pass, describe (check_result.hpp), rule_verdict and verdict_headroom (rule_verdict.hpp).
#include <algorithm>
#include <limits>
#include <utility>

#include "kvconf/numerics/number_text.hpp"
#include "kvconf/results/check_result.hpp"
#include "kvconf/results/rule_verdict.hpp"

namespace kvconf::results {

bool all_pass(const CheckResults& r) {
  return std::all_of(r.begin(), r.end(), [](const CheckResult& x) { return x.pass; });
}

std::string describe(const CheckResults& r) {
  std::string s;
  for (const auto& x : r) {
    s += x.rule + (x.pass ? " pass" : " FAIL") + " error=" + num_measured(x.error) + " bound=" + num_measured(x.bound) +
         " headroom=" + num_measured(x.headroom) + " seed=" + std::to_string(x.seed) + " " + x.detail + "\n";
  }
  return s;
}

RuleVerdict rule_verdict(std::string suite, std::string name) {
  RuleVerdict v;
  v.suite = std::move(suite);
  v.name = std::move(name);
  return v;
}

double verdict_headroom(double measured, double threshold) {
  if (threshold > 0) return (threshold - measured) / threshold;
  return measured == 0 ? 1.0 : -std::numeric_limits<double>::infinity();  // a zero threshold: equal or not
}

}  // namespace kvconf::results
