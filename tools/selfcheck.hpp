// The built-in self-checks that `kvconf run` executes until the kernel and model suites exist:
// quick, independent verifications of formats, arithmetic, the oracle and the bounds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvconf::tools {

struct CheckResult {
  bool passed = false;
  std::uint64_t cases = 0;  // how many values/inputs were checked
  std::string detail;       // one line: what was found (first mismatch on failure)
};

struct SelfCheck {
  std::string name;  // stable id, e.g. "formats.fp16.conversions"
  std::string what;  // one-line description
  std::function<CheckResult()> run;
};

// Registration, explicit per area (no static initialisers).
void add_format_checks(std::vector<SelfCheck>& out);
void add_oracle_checks(std::vector<SelfCheck>& out);
void add_bound_checks(std::vector<SelfCheck>& out);

std::vector<SelfCheck> all_self_checks();

}  // namespace kvconf::tools
