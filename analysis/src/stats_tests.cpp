// Hypothesis tests: McNemar on paired correctness (exact binomial or continuity-corrected chi-square), Mann–Whitney U
// (exact null distribution from the Gaussian binomial coefficient, or the tie- and continuity-corrected normal
// approximation) and Welch's unequal-variance t-test. Distributions from Boost.Math.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

#include "kvconf/analysis/stats.hpp"
#include "stats_checks.hpp"

namespace kvconf::analysis {

McNemarResult mcnemar_counts(std::size_t a_only, std::size_t b_only, std::size_t exact_below) {
  McNemarResult out;
  out.a_only = a_only;
  out.b_only = b_only;
  const std::size_t n = a_only + b_only;
  if (n == 0) {  // no discordant pair: no evidence either way
    out.test = {0.0, 1.0, 0.0, true};
    return out;
  }
  if (n < exact_below) {
    // Exact conditional test: given n discordant pairs, a_only ~ Bin(n, 1/2) under H0.
    const boost::math::binomial_distribution<double> bin(static_cast<double>(n), 0.5);
    const double tail = boost::math::cdf(bin, static_cast<double>(std::min(a_only, b_only)));
    out.test = {static_cast<double>(a_only), std::min(1.0, 2.0 * tail), 0.0, true};
    return out;
  }
  const double diff = std::abs(static_cast<double>(a_only) - static_cast<double>(b_only));
  const double corrected = std::max(diff - 1.0, 0.0);
  const double chi2 = corrected * corrected / static_cast<double>(n);
  const boost::math::chi_squared_distribution<double> dist(1.0);
  out.test = {chi2, boost::math::cdf(boost::math::complement(dist, chi2)), 1.0, false};
  return out;
}

McNemarResult mcnemar(std::span<const bool> a, std::span<const bool> b, std::size_t exact_below) {
  stats_detail::require_same_length("mcnemar", a.size(), b.size());
  stats_detail::require_at_least("mcnemar", "a", a.size(), 1);
  std::size_t a_only = 0, b_only = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] && !b[i]) ++a_only;
    if (!a[i] && b[i]) ++b_only;
  }
  return mcnemar_counts(a_only, b_only, exact_below);
}

namespace {

// Number of arrangements of m x's and n y's with U = u, for u = 0..m·n: the coefficients of the Gaussian binomial
// coefficient [m+n choose m]_q = prod_{i=1..m} (1 − q^(n+i)) / (1 − q^i) (Andrews, "The Theory of Partitions",
// ch. 3; Mann & Whitney 1947). Each step leaves [n+i choose i]_q, with integer coefficients <= C(n+i, i).
std::vector<std::int64_t> u_counts(std::size_t m, std::size_t n) {
  std::vector<std::int64_t> c(m * n + 1, 0);  // (m·n + 1) coefficients
  c[0] = 1;
  for (std::size_t i = 1; i <= m; ++i) {
    const std::size_t up = n + i;
    for (std::size_t u = m * n; u >= up; --u) c[u] -= c[u - up];  // × (1 − q^(n+i))
    for (std::size_t u = i; u <= m * n; ++u) c[u] += c[u - i];    // ÷ (1 − q^i): exact, a running sum
  }
  return c;
}

}  // namespace

TestResult mann_whitney_u(std::span<const double> x, std::span<const double> y) {
  const char* fn = "mann_whitney_u";
  stats_detail::require_at_least(fn, "x", x.size(), 1);
  stats_detail::require_at_least(fn, "y", y.size(), 1);
  stats_detail::require_finite(fn, "x", x);
  stats_detail::require_finite(fn, "y", y);
  const std::size_t m = x.size(), n = y.size(), total = m + n;
  std::vector<double> all(x.begin(), x.end());  // (m + n): x then y
  all.insert(all.end(), y.begin(), y.end());
  const std::vector<double> r = ranks(all);
  double rank_sum_x = 0.0;
  for (std::size_t i = 0; i < m; ++i) rank_sum_x += r[i];
  const double md = static_cast<double>(m), nd = static_cast<double>(n), Nd = static_cast<double>(total);
  const double u = rank_sum_x - md * (md + 1.0) / 2.0;  // = #(x > y) + ½ #(x = y)

  // Tie term Σ (t³ − t) over groups of tied values.
  std::vector<double> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  double tie_term = 0.0;
  for (std::size_t i = 0; i < total;) {
    std::size_t j = i;
    while (j < total && sorted[j] == sorted[i]) ++j;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }

  TestResult out;
  out.statistic = u;
  if (tie_term == 0.0 && std::min(m, n) <= 20 && total <= 60) {
    const std::vector<std::int64_t> c = u_counts(m, n);
    const auto k = static_cast<std::size_t>(u);  // an integer without ties
    std::int64_t below = 0, above = 0, all_count = 0;
    for (std::size_t v = 0; v < c.size(); ++v) {
      all_count += c[v];
      if (v <= k) below += c[v];
      if (v >= k) above += c[v];
    }
    const double tail = static_cast<double>(std::min(below, above)) / static_cast<double>(all_count);
    out.p_value = std::min(1.0, 2.0 * tail);
    out.exact = true;
    return out;
  }
  const double mean_u = md * nd / 2.0;
  const double var_u = md * nd / 12.0 * ((Nd + 1.0) - tie_term / (Nd * (Nd - 1.0)));
  if (!(var_u > 0.0)) {  // every value equal: U carries no information
    out.p_value = 1.0;
    return out;
  }
  const double d = u - mean_u;
  const double correction = d > 0.0 ? 0.5 : (d < 0.0 ? -0.5 : 0.0);
  const double z = (d - correction) / std::sqrt(var_u);
  const boost::math::normal_distribution<double> norm;
  out.p_value = std::min(1.0, 2.0 * boost::math::cdf(boost::math::complement(norm, std::abs(z))));
  return out;
}

TestResult welch_t(std::span<const double> x, std::span<const double> y) {
  const char* fn = "welch_t";
  stats_detail::require_at_least(fn, "x", x.size(), 2);
  stats_detail::require_at_least(fn, "y", y.size(), 2);
  stats_detail::require_finite(fn, "x", x);
  stats_detail::require_finite(fn, "y", y);
  const double nx = static_cast<double>(x.size()), ny = static_cast<double>(y.size());
  const double vx = stats_detail::sample_variance(x) / nx, vy = stats_detail::sample_variance(y) / ny;
  const double se2 = vx + vy;
  if (!(se2 > 0.0)) stats_detail::fail(fn, "both groups are constant (zero variance): t is undefined");
  TestResult out;
  out.statistic = (stats_detail::mean_of(x) - stats_detail::mean_of(y)) / std::sqrt(se2);
  out.df = se2 * se2 / (vx * vx / (nx - 1.0) + vy * vy / (ny - 1.0));  // Welch–Satterthwaite
  const boost::math::students_t_distribution<double> dist(out.df);
  out.p_value = std::min(1.0, 2.0 * boost::math::cdf(boost::math::complement(dist, std::abs(out.statistic))));
  return out;
}

}  // namespace kvconf::analysis
