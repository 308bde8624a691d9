// Unit tests of the seeded percentile bootstrap (analysis/stats): SplitMix64 against its published reference
// outputs, the percentile order statistics by hand, determinism per seed, coverage of a known mean, and CI widths
// that shrink as 1/sqrt(n) — statistical properties with margins derived in each comment.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/analysis/stats.hpp"
#include "stats_test_support.hpp"

namespace kvconf::analysis {
namespace {

using V = std::vector<double>;

// SplitMix64 (Vigna's splitmix64.c) from seed 1234567: the first five outputs as listed by the Rosetta Code task
// "Pseudo-random numbers/Splitmix64"; re-derived in python3 with 64-bit masked integer arithmetic.
TEST(StatsBootstrap, SplitMix64ReferenceOutputs) {
  std::uint64_t s = 1234567;
  const std::uint64_t want[] = {6457827717110365317ULL, 3203168211198807973ULL, 9817491932198370423ULL,
                                4593380528125082431ULL, 16408922859458223821ULL};
  for (std::uint64_t w : want) EXPECT_EQ(splitmix64_next(s), w);
}

// k = floor((B+1)(1 − level)/2); lo = k − 1, hi = B − k (0-based), by hand.
TEST(StatsBootstrap, PercentileIndicesByHand) {
  const auto check = [](std::size_t b, double level, std::size_t lo, std::size_t hi) {
    const PercentileIndices p = bootstrap_percentile_indices(b, level);
    EXPECT_EQ(p.lo, lo) << b << " " << level;
    EXPECT_EQ(p.hi, hi) << b << " " << level;
  };
  check(999, 0.95, 24, 974);    // k = 25: 24 resamples below lo, 24 above hi
  check(1000, 0.95, 24, 975);   // k = floor(25.025) = 25
  check(39, 0.95, 0, 38);       // k = 1: the smallest and largest resample
  check(199, 0.90, 9, 189);     // k = 10 although 1 − 0.9 is 0.0999…98 in binary
  check(9999, 0.99, 49, 9949);  // k = 50
  EXPECT_INVALID(bootstrap_percentile_indices(38, 0.95), "bootstrap_percentile_indices");  // k = 0
  EXPECT_INVALID(bootstrap_percentile_indices(1000, 1.0), "bootstrap_percentile_indices");
  EXPECT_INVALID(bootstrap_percentile_indices(1000, 0.0), "bootstrap_percentile_indices");
}

// With B = 39 at 95% the interval is [smallest, largest] resampled mean. For x = {0, 1} a resample is all zeros
// (or all ones) with probability 1/4, so among 39 resamples both extremes occur except with probability
// 2·(3/4)^39 ≈ 3e-5: the interval is [0, 1]. Any other order statistic would very likely give 0.5.
TEST(StatsBootstrap, IntervalIsReadAtThePercentileIndices) {
  const Interval ci = bootstrap_mean_ci(V{0.0, 1.0}, 39, 7);
  EXPECT_EQ(ci.lo, 0.0);
  EXPECT_EQ(ci.hi, 1.0);
  EXPECT_EQ(ci.estimate, 0.5);
  EXPECT_EQ(ci.level, 0.95);
}

TEST(StatsBootstrap, DeterministicForASeedAndDifferentAcrossSeeds) {
  std::mt19937_64 gen(11);
  std::normal_distribution<double> nd(0.0, 1.0);
  V x(40);
  for (double& v : x) v = nd(gen);
  const Interval a = bootstrap_mean_ci(x, 999, 42), b = bootstrap_mean_ci(x, 999, 42);
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);
  const Interval c = bootstrap_mean_ci(x, 999, 43);
  EXPECT_TRUE(c.lo != a.lo || c.hi != a.hi);  // 40 continuous values: equal order statistics would be a miracle
  EXPECT_LE(a.lo, a.estimate);
  EXPECT_GE(a.hi, a.estimate);
}

TEST(StatsBootstrap, EstimateAndDegenerateData) {
  const Interval m = bootstrap_mean_ci(V{1, 2, 3, 4}, 999, 1);
  EXPECT_EQ(m.estimate, 2.5);
  EXPECT_GE(m.lo, 1.0);
  EXPECT_LE(m.hi, 4.0);
  const Interval c = bootstrap_mean_ci(V{3.25, 3.25, 3.25}, 999, 1);  // every resample mean is 3.25
  EXPECT_EQ(c.lo, 3.25);
  EXPECT_EQ(c.hi, 3.25);
  // Paired correctness deltas: identical paths give [0, 0]; always-right vs always-wrong gives [1, 1].
  const V right = {1, 0, 1, 1, 0, 1}, ones = {1, 1, 1, 1, 1, 1}, zeros = {0, 0, 0, 0, 0, 0};
  const Interval same = bootstrap_paired_delta_ci(right, right, 999, 5);
  EXPECT_EQ(same.estimate, 0.0);
  EXPECT_EQ(same.lo, 0.0);
  EXPECT_EQ(same.hi, 0.0);
  const Interval all = bootstrap_paired_delta_ci(ones, zeros, 999, 5);
  EXPECT_EQ(all.lo, 1.0);
  EXPECT_EQ(all.hi, 1.0);
}

// Property: resampling pairs is resampling the differences, so with the same seed the paired interval is the mean
// interval of a − b.
TEST(StatsBootstrap, PairedDeltaResamplesPairs) {
  std::mt19937_64 gen(3);
  std::bernoulli_distribution on(0.6), off(0.5);
  V a(120), b(120), d(120);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = on(gen) ? 1.0 : 0.0;
    b[i] = off(gen) ? 1.0 : 0.0;
    d[i] = a[i] - b[i];
  }
  const Interval p = bootstrap_paired_delta_ci(a, b, 1999, 9), m = bootstrap_mean_ci(d, 1999, 9);
  EXPECT_EQ(p.lo, m.lo);
  EXPECT_EQ(p.hi, m.hi);
  EXPECT_LE(p.lo, p.estimate);
  EXPECT_GE(p.hi, p.estimate);
}

// Coverage: 400 samples of n = 50 from N(3, 2²), B = 999. The percentile interval of a mean behaves like
// x̄ ± 1.96·σ̂_plugin/sqrt(n), σ̂_plugin = s·sqrt(49/50), i.e. a t interval with multiplier 1.94 on 49 df, whose
// coverage is about 0.943. The count of covering intervals is Binomial(400, ~0.943) (sd ≈ 4.6, i.e. 0.012 in
// rate), so [0.90, 0.98] is more than 3 sd either side; a wrong index (e.g. a 90% interval: 0.90 coverage) or a
// biased resampler fails it.
TEST(StatsBootstrap, CoverageOfAKnownMean) {
  std::mt19937_64 gen(2024);
  std::normal_distribution<double> nd(3.0, 2.0);
  const int trials = 400;
  int covered = 0;
  for (int t = 0; t < trials; ++t) {
    V x(50);
    for (double& v : x) v = nd(gen);
    const Interval ci = bootstrap_mean_ci(x, 999, static_cast<std::uint64_t>(t));
    EXPECT_LE(ci.lo, ci.estimate);
    EXPECT_GE(ci.hi, ci.estimate);
    covered += (ci.lo <= 3.0 && 3.0 <= ci.hi);
  }
  const double rate = static_cast<double>(covered) / trials;
  EXPECT_GE(rate, 0.90);
  EXPECT_LE(rate, 0.98);
}

// Width ∝ 1/sqrt(n). Data: the grid x_i = (i + ½)/n, plug-in variance σ² = (1 − 1/n²)/12, so the resampled mean is
// close to N(x̄, σ²/n) (CLT; the grid's excess kurtosis −1.2 enters as −1.2/n) and the 95% width is near
// 2·1.959964·σ/sqrt(n). With B = 4000 an endpoint's Monte Carlo sd is sqrt(.025·.975/B)/φ(1.96) = 0.042 σ/sqrt(n),
// the width's ≈ 0.06 σ/sqrt(n), 1.5% of the width: ±7% per width and ±10% on the ratio of two widths (sd 2.1%)
// are over 4 sd.
TEST(StatsBootstrap, WidthShrinksAsOneOverSqrtN) {
  std::vector<double> widths;
  for (std::size_t n : {100u, 400u, 1600u}) {
    V x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = (static_cast<double>(i) + 0.5) / static_cast<double>(n);
    const double nn = static_cast<double>(n);
    const double sigma = std::sqrt((1.0 - 1.0 / (nn * nn)) / 12.0);
    const double expected = 2.0 * 1.959964 * sigma / std::sqrt(nn);
    const Interval ci = bootstrap_mean_ci(x, 4000, 77 + n);
    const double w = ci.hi - ci.lo;
    EXPECT_NEAR(w / expected, 1.0, 0.07) << n;
    widths.push_back(w);
  }
  EXPECT_NEAR(widths[0] / widths[1], 2.0, 0.2);
  EXPECT_NEAR(widths[0] / widths[2], 4.0, 0.4);
}

TEST(StatsBootstrap, BadInputThrowsNamingTheFunction) {
  EXPECT_INVALID(bootstrap_mean_ci(V{}, 999, 1), "bootstrap_mean_ci");
  EXPECT_INVALID(bootstrap_mean_ci(V{1, 2}, 10, 1), "bootstrap_mean_ci");  // too few resamples for 95%
  EXPECT_INVALID(bootstrap_mean_ci(V{1, 2}, 999, 1, 1.5), "bootstrap_mean_ci");
  EXPECT_INVALID(bootstrap_mean_ci(V{1, NAN}, 999, 1), "bootstrap_mean_ci");
  EXPECT_INVALID(bootstrap_paired_delta_ci(V{1, 2}, V{1}, 999, 1), "bootstrap_paired_delta_ci");
  EXPECT_INVALID(bootstrap_paired_delta_ci(V{}, V{}, 999, 1), "bootstrap_paired_delta_ci");
}

}  // namespace
}  // namespace kvconf::analysis
