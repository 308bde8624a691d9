// The statistics of the seed paper's §4.4 and §6, for reports over many run pairs: McNemar's test on paired
// correctness, Bonferroni and Benjamini–Hochberg corrections, seeded bootstrap 95% CIs, Mann–Whitney U, Welch's t,
// Pearson and Spearman correlations and partial correlation. Distributions from Boost.Math. Each function is tested
// against worked values from a textbook or reference table (tests/analysis/stats_test.cpp cites them).
// Bad input (mismatched lengths, too few values) throws std::invalid_argument naming the function and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvconf::analysis {

struct TestResult {
  double statistic = 0.0;  // the test's statistic (McNemar: chi-square or b; U; t; ...)
  double p_value = 1.0;    // two-sided
  double df = 0.0;         // degrees of freedom where the test has them (chi-square 1, Welch's ν), else 0
  bool exact = false;      // computed from the exact distribution (binomial, exact U) rather than an approximation
};

// McNemar's test on paired binary outcomes (a[i], b[i]: correct under path A / path B on the same example).
// Discordant pairs: n01 = #(a && !b), n10 = #(!a && b). When n01 + n10 < exact_below (default 25), the exact
// two-sided binomial test (p = min(1, 2·P[X <= min(n01,n10)]), X ~ Bin(n01+n10, 1/2)); otherwise the chi-square
// statistic with continuity correction (|n01 − n10| − 1)² / (n01 + n10), 1 df. No discordant pairs: p = 1.
struct McNemarResult {
  std::size_t a_only = 0;  // n01: A correct, B wrong
  std::size_t b_only = 0;  // n10: B correct, A wrong
  TestResult test;
};
McNemarResult mcnemar(std::span<const bool> a, std::span<const bool> b, std::size_t exact_below = 25);
// The same test from the discordant counts alone (a 2×2 table's off-diagonal cells). test.statistic is a_only when
// exact, else the corrected chi-square; test.df is 1 for chi-square, 0 when exact.
McNemarResult mcnemar_counts(std::size_t a_only, std::size_t b_only, std::size_t exact_below = 25);

// Multiple-comparison corrections: adjusted p-values in the input order, each clamped to [0, 1]. Empty input gives
// an empty vector; a p-value outside [0, 1] (or NaN) throws.
std::vector<double> bonferroni(std::span<const double> p);
std::vector<double> benjamini_hochberg(std::span<const double> p);  // step-up, monotone (the "BH" of p.adjust)

// SplitMix64 (Steele, Lea, Flood 2014; Vigna's reference C): advances `state` by 0x9E3779B97F4A7C15 and returns the
// mixed value. The bootstrap's only source of randomness, so results are the same on every platform and compiler.
std::uint64_t splitmix64_next(std::uint64_t& state);

// Seeded percentile bootstrap: `resamples` resamples (with replacement, SplitMix64 from `seed`; indices drawn
// without modulo bias) of the mean. The interval is read from the sorted resampled statistics at the 0-based
// indices of bootstrap_percentile_indices. Throws when resamples are too few for the level (95%: at least 39).
struct Interval {
  double estimate = 0.0;  // the statistic on the data itself
  double lo = 0.0, hi = 0.0;
  double level = 0.95;
};
Interval bootstrap_mean_ci(std::span<const double> x, std::size_t resamples, std::uint64_t seed, double level = 0.95);
// 0-based positions in the sorted resampled statistics that bound a `level` interval (Davison & Hinkley 1997, ch. 5:
// the k-th and (B+1−k)-th order statistics, k = floor((B+1)(1−level)/2)); symmetric, so as many resamples lie below
// lo as above hi. B = 999 at 95%: 24 and 974.
struct PercentileIndices {
  std::size_t lo = 0, hi = 0;
};
PercentileIndices bootstrap_percentile_indices(std::size_t resamples, double level = 0.95);
// Mean of the paired differences a[i] − b[i] (e.g. correctness 1/0 of cache-ON minus cache-OFF: the accuracy delta),
// resampling pairs.
Interval bootstrap_paired_delta_ci(std::span<const double> a, std::span<const double> b, std::size_t resamples,
                                   std::uint64_t seed, double level = 0.95);

// Mann–Whitney U (two-sided). statistic = U of x (the number of pairs with x > y, ties count 1/2). Exact null
// distribution when there are no ties and min(n_x, n_y) <= 20 (and n_x + n_y <= 60); otherwise the normal
// approximation with tie correction and continuity correction 0.5.
TestResult mann_whitney_u(std::span<const double> x, std::span<const double> y);

// Welch's unequal-variance t-test (two-sided): statistic t = (mean x − mean y) / sqrt(s²x/nx + s²y/ny), df from the
// Welch–Satterthwaite equation. Needs at least 2 values per group.
TestResult welch_t(std::span<const double> x, std::span<const double> y);

struct Correlation {
  double r = 0.0;        // coefficient in [-1, 1]
  double p_value = 1.0;  // two-sided, from t = r sqrt(df / (1 − r²)) with df = n − 2 (n − 3 for partial)
  std::size_t n = 0;
};
// Need n >= 3 (partial: n >= 4) finite pairs; a constant input (zero variance: r undefined) throws.
Correlation pearson(std::span<const double> x, std::span<const double> y);
Correlation spearman(std::span<const double> x, std::span<const double> y);  // Pearson on mid-ranks (ties averaged)
// Partial correlation of x and y controlling for z: (r_xy − r_xz r_yz) / sqrt((1 − r_xz²)(1 − r_yz²)).
Correlation partial_pearson(std::span<const double> x, std::span<const double> y, std::span<const double> z);

// Mid-ranks (1-based; tied values get the mean of their ranks), in input order. Empty input gives an empty vector.
std::vector<double> ranks(std::span<const double> x);

}  // namespace kvconf::analysis
