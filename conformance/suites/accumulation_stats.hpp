// The statistics behind the accumulation suite's bands (docs/TOLERANCES.md "Accumulation (Experiment 1)"): fp16
// spacing, the expected relative RNE error of a log-uniform mantissa, sample means with an empirical-Bernstein
// (Maurer–Pontil) half-width, and the Gaussian quantile used for sums of squared errors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace kvconf::conformance::accumulation {

inline constexpr double kU16 = 0x1p-11;  // fp16 unit roundoff u = 2^-11

// Spacing of fp16 values at |x| (2^-24 in the subnormal range; the top binade's spacing beyond).
inline double ulp16(double x) {
  const double a = std::fabs(x);
  if (a < 0x1p-14) return 0x1p-24;
  return std::ldexp(1.0, std::min(std::ilogb(a), 15) - 10);
}

// E|fl16(s) − s| / |s| for a log-uniform mantissa and an error uniform within the spacing: u / (4 ln 2).
inline double benford_mean_rel_error() { return kU16 / (4.0 * std::log(2.0)); }

// Every band of the suite fails with probability at most kAlpha under its model; kBands bounds the number of bands
// the suite evaluates, so that the whole suite fails spuriously with probability <= kAlpha·kBands = 1e-9.
inline constexpr double kBands = 2000.0;
inline constexpr double kAlpha = 1e-9 / kBands;

// Sample mean of values in an interval of width `range`, and its two-sided confidence half-width at level kAlpha:
// the empirical Bernstein bound of Maurer & Pontil (2009, Thm 4), sqrt(2·V·L/N) + 7·range·L/(3(N − 1)),
// V the unbiased sample variance, L = ln(2/kAlpha) (two-sided: each side at kAlpha/2).
struct MeanBand {
  double mean = 0.0;
  double half_width = 0.0;
  std::size_t n = 0;
};
inline MeanBand mean_band(const std::vector<double>& v, double range) {
  MeanBand b;
  b.n = v.size();
  if (b.n < 2) return {b.n ? v[0] : 0.0, HUGE_VAL, b.n};
  double s = 0.0;
  for (double x : v) s += x;
  b.mean = s / static_cast<double>(b.n);
  double ss = 0.0;
  for (double x : v) ss += (x - b.mean) * (x - b.mean);
  const double var = ss / static_cast<double>(b.n - 1);
  const double L = std::log(4.0 / kAlpha);
  const double N = static_cast<double>(b.n);
  b.half_width = std::sqrt(2.0 * var * L / N) + 7.0 * range * L / (3.0 * (N - 1.0));
  return b;
}

// z with P(|Z| > z) = kAlpha for a standard normal Z (bisection on erfc).
inline double normal_quantile_two_sided() {
  double lo = 0.0, hi = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (std::erfc(mid / std::sqrt(2.0)) > kAlpha ? lo : hi) = mid;
  }
  return hi;
}

}  // namespace kvconf::conformance::accumulation
