// Seeded percentile bootstrap CIs of a mean and of a paired mean difference. SplitMix64 drives the resampling and
// indices are drawn without modulo bias, so a (data, resamples, seed, level) gives the same interval everywhere.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kvconf/analysis/stats.hpp"
#include "stats_checks.hpp"

namespace kvconf::analysis {

std::uint64_t splitmix64_next(std::uint64_t& state) {
  state += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

namespace {

// Uniform index in [0, n): reject the 2^64 mod n lowest values so the remaining range is a multiple of n
// (the debiased-modulo method; Lemire 2019, "Fast random integer generation in an interval", §2).
std::size_t uniform_index(std::uint64_t& state, std::size_t n) {
  const std::uint64_t bound = n;
  const std::uint64_t threshold = (0 - bound) % bound;  // = 2^64 mod n
  for (;;) {
    const std::uint64_t r = splitmix64_next(state);
    if (r >= threshold) return static_cast<std::size_t>(r % bound);
  }
}

PercentileIndices indices_or_throw(const char* fn, std::size_t resamples, double level) {
  if (!(level > 0.0 && level < 1.0)) stats_detail::fail(fn, "level " + std::to_string(level) + " is not in (0, 1)");
  // + 1e-9: 1 − level is inexact in binary (1 − 0.9 = 0.0999…98), and (B+1)(1 − level)/2 = 10 must not floor to 9.
  const double k = std::floor((static_cast<double>(resamples) + 1.0) * (1.0 - level) / 2.0 + 1e-9);
  if (k < 1.0) {
    const double need = std::ceil(2.0 / (1.0 - level) - 1.0 - 1e-9);
    stats_detail::fail(fn, std::to_string(resamples) + " resamples are too few for a " + std::to_string(level) +
                               " interval (need at least " + std::to_string(static_cast<long long>(need)) + ")");
  }
  const auto ku = static_cast<std::size_t>(k);  // 1-based: the k-th and (B+1−k)-th order statistics
  return {ku - 1, resamples - ku};
}

Interval bootstrap_of_mean(const char* fn, std::span<const double> x, std::size_t resamples, std::uint64_t seed,
                           double level) {
  const PercentileIndices idx = indices_or_throw(fn, resamples, level);
  const std::size_t n = x.size();
  std::vector<double> means(resamples);  // (resamples)
  std::uint64_t state = seed;
  for (std::size_t r = 0; r < resamples; ++r) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += x[uniform_index(state, n)];
    means[r] = s / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  Interval out;
  out.estimate = stats_detail::mean_of(x);
  out.lo = means[idx.lo];
  out.hi = means[idx.hi];
  out.level = level;
  return out;
}

}  // namespace

PercentileIndices bootstrap_percentile_indices(std::size_t resamples, double level) {
  return indices_or_throw("bootstrap_percentile_indices", resamples, level);
}

Interval bootstrap_mean_ci(std::span<const double> x, std::size_t resamples, std::uint64_t seed, double level) {
  stats_detail::require_at_least("bootstrap_mean_ci", "x", x.size(), 1);
  stats_detail::require_finite("bootstrap_mean_ci", "x", x);
  return bootstrap_of_mean("bootstrap_mean_ci", x, resamples, seed, level);
}

Interval bootstrap_paired_delta_ci(std::span<const double> a, std::span<const double> b, std::size_t resamples,
                                   std::uint64_t seed, double level) {
  const char* fn = "bootstrap_paired_delta_ci";
  stats_detail::require_same_length(fn, a.size(), b.size());
  stats_detail::require_at_least(fn, "a", a.size(), 1);
  stats_detail::require_finite(fn, "a", a);
  stats_detail::require_finite(fn, "b", b);
  std::vector<double> d(a.size());  // (pairs) a[i] − b[i]: resampling d resamples whole pairs
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return bootstrap_of_mean(fn, d, resamples, seed, level);
}

}  // namespace kvconf::analysis
