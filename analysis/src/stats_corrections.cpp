// Multiple-comparison corrections of p-values: Bonferroni (m·p) and Benjamini–Hochberg step-up (the "BH" of R's
// p.adjust): sorted ascending, p_(i)·m/i, then the running minimum from the largest down, clamped to 1.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "kvconf/analysis/stats.hpp"
#include "stats_checks.hpp"

namespace kvconf::analysis {
namespace {

void require_p_values(const char* fn, std::span<const double> p) {
  for (std::size_t i = 0; i < p.size(); ++i)
    if (!(p[i] >= 0.0 && p[i] <= 1.0))  // also rejects NaN
      stats_detail::fail(fn, "p[" + std::to_string(i) + "] = " + std::to_string(p[i]) + " is not in [0, 1]");
}

}  // namespace

std::vector<double> bonferroni(std::span<const double> p) {
  require_p_values("bonferroni", p);
  const double m = static_cast<double>(p.size());
  std::vector<double> out(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) out[i] = std::min(1.0, m * p[i]);
  return out;
}

std::vector<double> benjamini_hochberg(std::span<const double> p) {
  require_p_values("benjamini_hochberg", p);
  const std::size_t m = p.size();
  std::vector<std::size_t> order(m);  // indices of p, ascending by value (stable: ties keep input order)
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return p[i] < p[j]; });
  std::vector<double> out(m);
  double running_min = 1.0;
  for (std::size_t k = m; k-- > 0;) {  // rank k+1, from the largest p down
    const double scaled = p[order[k]] * static_cast<double>(m) / static_cast<double>(k + 1);
    running_min = std::min(running_min, scaled);
    out[order[k]] = running_min;
  }
  return out;
}

}  // namespace kvconf::analysis
