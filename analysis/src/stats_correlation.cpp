// Correlations: mid-ranks, Pearson's r, Spearman's rho (Pearson on mid-ranks) and the partial correlation of x and y
// controlling for z, each with the two-sided p-value of t = r sqrt(df / (1 − r²)) under Student's t (Boost.Math).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <boost/math/distributions/students_t.hpp>

#include "kvconf/analysis/stats.hpp"
#include "stats_checks.hpp"

namespace kvconf::analysis {
namespace {

// Two-sided p-value of a correlation r with df degrees of freedom.
double correlation_p(double r, double df) {
  if (std::abs(r) >= 1.0) return 0.0;  // t is infinite
  const double t = r * std::sqrt(df / (1.0 - r * r));
  const boost::math::students_t_distribution<double> dist(df);
  return std::min(1.0, 2.0 * boost::math::cdf(boost::math::complement(dist, std::abs(t))));
}

// r from centred sums (two-pass), clamped to [-1, 1]; throws when x or y is constant.
double pearson_r(const char* fn, std::span<const double> x, std::span<const double> y) {
  const double mx = stats_detail::mean_of(x), my = stats_detail::mean_of(y);
  double sxx = 0.0, syy = 0.0, sxy = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxx += dx * dx;
    syy += dy * dy;
    sxy += dx * dy;
  }
  if (!(sxx > 0.0)) stats_detail::fail(fn, "x is constant (zero variance): the correlation is undefined");
  if (!(syy > 0.0)) stats_detail::fail(fn, "y is constant (zero variance): the correlation is undefined");
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

void require_pairs(const char* fn, std::span<const double> x, std::span<const double> y, std::size_t min_n) {
  stats_detail::require_same_length(fn, x.size(), y.size());
  stats_detail::require_at_least(fn, "x", x.size(), min_n);
  stats_detail::require_finite(fn, "x", x);
  stats_detail::require_finite(fn, "y", y);
}

}  // namespace

std::vector<double> ranks(std::span<const double> x) {
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isnan(x[i])) stats_detail::fail("ranks", "x[" + std::to_string(i) + "] is NaN");
  std::vector<std::size_t> order(x.size());  // indices of x, ascending by value
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return x[i] < x[j]; });
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && x[order[j]] == x[order[i]]) ++j;
    const double mid = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;  // mean of ranks i+1 .. j
    for (std::size_t k = i; k < j; ++k) out[order[k]] = mid;
    i = j;
  }
  return out;
}

Correlation pearson(std::span<const double> x, std::span<const double> y) {
  require_pairs("pearson", x, y, 3);
  Correlation out;
  out.n = x.size();
  out.r = pearson_r("pearson", x, y);
  out.p_value = correlation_p(out.r, static_cast<double>(out.n) - 2.0);
  return out;
}

Correlation spearman(std::span<const double> x, std::span<const double> y) {
  require_pairs("spearman", x, y, 3);
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  Correlation out;
  out.n = x.size();
  out.r = pearson_r("spearman", rx, ry);
  out.p_value = correlation_p(out.r, static_cast<double>(out.n) - 2.0);
  return out;
}

Correlation partial_pearson(std::span<const double> x, std::span<const double> y, std::span<const double> z) {
  const char* fn = "partial_pearson";
  require_pairs(fn, x, y, 4);
  stats_detail::require_same_length(fn, x.size(), z.size());
  stats_detail::require_finite(fn, "z", z);
  const double rxy = pearson_r(fn, x, y), rxz = pearson_r(fn, x, z), ryz = pearson_r(fn, y, z);
  const double denom = std::sqrt((1.0 - rxz * rxz) * (1.0 - ryz * ryz));
  if (!(denom > 0.0)) stats_detail::fail(fn, "x or y is a linear function of z: the partial correlation is undefined");
  Correlation out;
  out.n = x.size();
  out.r = std::clamp((rxy - rxz * ryz) / denom, -1.0, 1.0);
  out.p_value = correlation_p(out.r, static_cast<double>(out.n) - 3.0);
  return out;
}

}  // namespace kvconf::analysis
