// One rule's verdict over a group of records (a report's JUnit test case): what the model rules of conformance/ and
// the report's kernel rules return, and what reports render.
#pragma once

#include <string>

namespace kvconf::results {

struct RuleVerdict {  // one JUnit test case of a report
  std::string suite;  // e.g. "model.fixture:llama2-tiny.fp16-eager" or "kernels.cpu.attn.a1_flash2.f16"
  std::string name;   // rule name, e.g. "FlipsAreNearTies", "Fp32TokensIdentical", "oracle_bound/<case_id>"
  bool pass = false;
  double measured = 0, threshold = 0, headroom = 0;
  std::string detail;
  std::string skipped;  // non-empty: the rule was not applied (why); pass is true and measured/threshold are 0
};

// A verdict of `suite` and rule `name`, not yet decided (pass false, numbers 0): the rules fill in the rest.
RuleVerdict rule_verdict(std::string suite, std::string name);

// (threshold − measured) / threshold; a zero threshold: 1 when measured is 0, −inf otherwise.
double verdict_headroom(double measured, double threshold);

}  // namespace kvconf::results
