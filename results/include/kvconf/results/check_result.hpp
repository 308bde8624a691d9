// The result of one rule on one kernel and one case (CheckResult), and a measured cache-ON vs cache-OFF difference
// (OnOffDiff): the words every check, record, report and command shares. The ground floor: no kvconf dependency but
// the number formatter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvconf::results {

// One rule applied to one kernel on one case.
struct CheckResult {
  std::string rule;  // "oracle_bound", "two_sided", "on_off_bound", "on_off_bitwise", "chunked_bound",
                     // "chunked_bitwise", "unused_slots", "capacity_bitwise", ...
  bool pass = false;
  double error = 0.0;     // the measured quantity (max over elements: |computed − oracle|, |on − off|, ...)
  double bound = 0.0;     // its threshold (from reference/ bounds; 0 for bitwise rules)
  double headroom = 0.0;  // (bound − error) / bound; for bitwise rules 1 when equal, −inf otherwise
  std::uint64_t seed = 0;
  std::string detail;  // for people: worst element, its values, the seed; consumers read the fields below
  // The numbers behind `detail`, where the rule has them (empty otherwise):
  std::optional<double> reference_error;   // two_sided: the naive reference implementation's own error (the bound is
                                           // a factor times it plus a floor)
  std::optional<std::size_t> worst_index;  // flat index of the worst element of the kernel's output
  std::optional<double> worst_value;       // the kernel's value there
  std::optional<double> worst_expected;    // the oracle's value there
  std::string paths;                       // the kernel paths (launch plans) the compared runs took, "on | off"
};
using CheckResults = std::vector<CheckResult>;

bool all_pass(const CheckResults& r);
// One line per result: "rule pass|FAIL error=… bound=… headroom=… seed=… detail".
std::string describe(const CheckResults& r);

// Measured cache-ON vs cache-OFF difference, no bound (the table in docs/KERNELS.md).
struct OnOffDiff {
  std::size_t elements = 0;
  std::size_t differing = 0;  // elements whose bits differ
  double max_ulp = 0.0;       // max |on − off| / ulp(max(|on|, |off|)), ulps of the output format at the larger
  double max_abs = 0.0;       // max |on − off|
  double max_rel = 0.0;       // normwise: max |on − off| / max |off| (elementwise ratios blow up near zero)
  std::string paths;          // the kernel paths each side took
};

}  // namespace kvconf::results
