// Unit tests of analysis/stats (tests, corrections, correlations) against worked values from textbooks, papers and
// printed tables, each cited where it is used. Where a printed value has few digits, the digits asserted beyond it
// were recomputed with python3's standard library by a different method (say each comment): exact fractions, brute
// enumeration, Simpson integration of the t density, math.erfc for the chi-square(1) and normal tails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kvconf/analysis/stats.hpp"
#include "stats_test_support.hpp"

namespace kvconf::analysis {
namespace {

using V = std::vector<double>;

// Paired outcomes from a 2×2 table (both, a only, b only, neither), as contiguous bools for std::span<const bool>.
struct Paired {
  std::size_t n = 0;
  std::unique_ptr<bool[]> a, b;
  Paired(std::size_t both, std::size_t a_only, std::size_t b_only, std::size_t neither)
      : n(both + a_only + b_only + neither), a(new bool[n]), b(new bool[n]) {
    std::size_t i = 0;
    const auto put = [&](std::size_t count, bool va, bool vb) {
      for (std::size_t k = 0; k < count; ++k, ++i) {
        a[i] = va;
        b[i] = vb;
      }
    };
    put(both, true, true);
    put(b_only, false, true);  // interleave the order a little: the count must not depend on it
    put(neither, false, false);
    put(a_only, true, false);
  }
  std::span<const bool> sa() const { return {a.get(), n}; }
  std::span<const bool> sb() const { return {b.get(), n}; }
};

// ---- McNemar -----------------------------------------------------------------------------------------------------

// Agresti, "An Introduction to Categorical Data Analysis", 2nd ed. (2007), §8.1.1, Table 8.1: approval of the Prime
// Minister in two surveys of the same 1600 people: 794 approve both times, 150 approve then disapprove, 86
// disapprove then approve, 570 disapprove both times. Agresti's (uncorrected) z = (86 − 150)/sqrt(236) = −4.17;
// with the continuity correction the statistic is (|150 − 86| − 1)² / 236 = 3969/236 = 16.81779661…, and its
// chi-square(1) tail is 4.1145622813e-05 (python3: math.erfc(math.sqrt(x / 2))).
TEST(StatsMcNemar, AgrestiPrimeMinisterApproval) {
  const Paired t(794, 150, 86, 570);
  const McNemarResult r = mcnemar(t.sa(), t.sb());
  EXPECT_EQ(r.a_only, 150u);
  EXPECT_EQ(r.b_only, 86u);
  EXPECT_FALSE(r.test.exact);
  EXPECT_EQ(r.test.df, 1.0);
  EXPECT_NEAR(r.test.statistic, 3969.0 / 236.0, 1e-12);
  EXPECT_NEAR(r.test.p_value, 4.1145622813459415e-05, 1e-12);
  // Agresti's z² is the uncorrected statistic 64²/236 = 17.36: ours is smaller by the correction, as it must be.
  EXPECT_LT(r.test.statistic, 4.17 * 4.17);
}

// Fagerland, Lydersen & Laake, "The McNemar test for binary matched-pairs data: mid-p and asymptotic are better than
// exact conditional", BMC Med. Res. Methodol. 13:91 (2013), the airway hyper-responsiveness example (21 children
// before/after stem cell transplantation; discordant pairs 1 and 7): exact conditional p = 0.070. By hand:
// 2·P[X <= 1], X ~ Bin(8, 1/2) = 2·(1 + 8)/256 = 0.0703125 exactly.
TEST(StatsMcNemar, FagerlandExactConditional) {
  const Paired t(1, 1, 7, 12);
  const McNemarResult r = mcnemar(t.sa(), t.sb());
  EXPECT_TRUE(r.test.exact);
  EXPECT_EQ(r.test.df, 0.0);
  EXPECT_EQ(r.test.statistic, 1.0);  // a_only
  EXPECT_NEAR(r.test.p_value, 18.0 / 256.0, 1e-15);
  EXPECT_NEAR(r.test.p_value, 0.070, 5e-4);  // the paper's printed value
  // Forcing the chi-square form: (|1 − 7| − 1)²/8 = 3.125, tail 0.07709987174354177 (python3 math.erfc).
  const McNemarResult c = mcnemar_counts(1, 7, 0);
  EXPECT_FALSE(c.test.exact);
  EXPECT_NEAR(c.test.statistic, 3.125, 1e-15);
  EXPECT_NEAR(c.test.p_value, 0.07709987174354177, 1e-13);
}

// The switch at 25 discordant pairs. 16 vs 8 (24 pairs): exact, 2·Σ_{k<=8} C(24,k) / 2^24 = 0.15158963203430176
// (python3 exact integers). 17 vs 8 (25 pairs): chi-square (|9| − 1)²/25 = 2.56, tail 0.109598583399116.
// All discordant pairs one way, 5 vs 0: exact 2/2^5 = 1/16. No discordant pairs: p = 1.
TEST(StatsMcNemar, ExactBelowTwentyFiveDiscordantPairsChiSquareFrom) {
  const McNemarResult e = mcnemar_counts(16, 8);
  EXPECT_TRUE(e.test.exact);
  EXPECT_NEAR(e.test.p_value, 0.15158963203430176, 1e-13);
  const McNemarResult c = mcnemar_counts(17, 8);
  EXPECT_FALSE(c.test.exact);
  EXPECT_NEAR(c.test.statistic, 2.56, 1e-14);
  EXPECT_NEAR(c.test.p_value, 0.109598583399116, 1e-13);
  EXPECT_NEAR(mcnemar_counts(0, 5).test.p_value, 1.0 / 16.0, 1e-15);
  EXPECT_NEAR(mcnemar_counts(5, 0).test.p_value, 1.0 / 16.0, 1e-15);
  EXPECT_EQ(mcnemar_counts(0, 0).test.p_value, 1.0);
  EXPECT_EQ(mcnemar_counts(4, 4).test.p_value, 1.0);  // 2·P[X <= 4], X ~ Bin(8, ½), exceeds 1: clamped
  const Paired none(10, 0, 0, 3);
  EXPECT_EQ(mcnemar(none.sa(), none.sb()).test.p_value, 1.0);
}

TEST(StatsMcNemar, BadInputThrowsNamingTheFunction) {
  const Paired t(3, 1, 1, 0), u(2, 1, 1, 0);
  EXPECT_INVALID(mcnemar(t.sa(), u.sb()), "mcnemar");
  EXPECT_INVALID(mcnemar(std::span<const bool>{}, std::span<const bool>{}), "mcnemar");
}

// ---- Bonferroni and Benjamini–Hochberg ---------------------------------------------------------------------------

// Benjamini & Hochberg, "Controlling the false discovery rate", JRSS B 57:289–300 (1995), §4.1: the 15 ordered
// p-values of a study of myocardial infarction treatments. At q = 0.05 the step-up procedure rejects the four
// smallest (p(4) = 0.0095 <= 4/15·0.05, p(5) = 0.0201 > 5/15·0.05 and no larger p(i) passes), Bonferroni only three
// (0.05/15 = 0.00333). The adjusted values below were recomputed in python3 straight from the definition
// adj(i) = min_{j>=i} min(1, m·p(j)/j) with a double loop (not the running minimum used in the code).
const V kBh1995 = {0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344,
                   0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000};

TEST(StatsCorrections, BenjaminiHochberg1995Example) {
  const V adj = benjamini_hochberg(kBh1995);
  const V want = {0.0015, 0.003,  0.0095, 0.035625,           0.0603,   0.06385714285714286, 0.06385714285714286,
                  0.0645, 0.0765, 0.486,  0.5811818181818182, 0.714875, 0.7532307692307694,  0.8132142857142857,
                  1.0};
  ASSERT_EQ(adj.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(adj[i], want[i], 1e-14) << i;
  std::size_t rejected = 0;
  for (double a : adj) rejected += a <= 0.05;
  EXPECT_EQ(rejected, 4u);
  std::size_t bonf_rejected = 0;
  for (double a : bonferroni(kBh1995)) bonf_rejected += a <= 0.05;
  EXPECT_EQ(bonf_rejected, 3u);
}

TEST(StatsCorrections, InputOrderIsKeptAndTiesShareTheirValue) {
  // By hand: sorted 0.005, 0.01, 0.03, 0.04 scale by 4/i to 0.02, 0.02, 0.04, 0.04 (running min from the top
  // changes nothing); back in input order.
  const V adj = benjamini_hochberg(V{0.01, 0.04, 0.03, 0.005});
  EXPECT_NEAR(adj[0], 0.02, 1e-15);
  EXPECT_NEAR(adj[1], 0.04, 1e-15);
  EXPECT_NEAR(adj[2], 0.04, 1e-15);
  EXPECT_NEAR(adj[3], 0.02, 1e-15);
  // Ties: 0.02·2/2 and 0.02·2/1, running minimum gives 0.02 to both (as p.adjust does).
  const V tie = benjamini_hochberg(V{0.02, 0.02});
  EXPECT_EQ(tie[0], 0.02);
  EXPECT_EQ(tie[1], 0.02);
  // Step-up: a large p-value at rank m pulls smaller ones down (0.04·3/3 = 0.04 < 0.03·3/2 = 0.045).
  const V up = benjamini_hochberg(V{0.03, 0.04, 0.01});
  EXPECT_NEAR(up[0], 0.04, 1e-15);
  EXPECT_NEAR(up[1], 0.04, 1e-15);
  EXPECT_NEAR(up[2], 0.03, 1e-15);
}

TEST(StatsCorrections, BonferroniMultipliesAndClamps) {
  const V adj = bonferroni(V{0.01, 0.2, 0.5, 0.0});
  EXPECT_NEAR(adj[0], 0.04, 1e-15);
  EXPECT_NEAR(adj[1], 0.8, 1e-15);
  EXPECT_EQ(adj[2], 1.0);
  EXPECT_EQ(adj[3], 0.0);
  EXPECT_TRUE(bonferroni(V{}).empty());
  EXPECT_TRUE(benjamini_hochberg(V{}).empty());
}

TEST(StatsCorrections, BadInputThrowsNamingTheFunction) {
  EXPECT_INVALID(bonferroni(V{0.1, 1.5}), "bonferroni");
  EXPECT_INVALID(bonferroni(V{-0.1}), "bonferroni");
  EXPECT_INVALID(benjamini_hochberg(V{0.1, std::nan("")}), "benjamini_hochberg");
}

// ---- Mann–Whitney U ----------------------------------------------------------------------------------------------

// m x-values above exactly k_i of the y-values 1..n each, so U = Σ k_i, with no ties (x_i = k_i + 0.5 + i/1000).
std::pair<V, V> data_with_u(std::size_t m, std::size_t n, std::size_t u) {
  V x(m), y(n);
  for (std::size_t j = 0; j < n; ++j) y[j] = static_cast<double>(j + 1);
  for (std::size_t i = 0; i < m; ++i) {
    const std::size_t k = std::min(u, n);
    u -= k;
    x[i] = static_cast<double>(k) + 0.5 + static_cast<double>(i) / 1000.0;
  }
  return {x, y};
}

// Lower critical values of U for a two-tailed test at α = 0.05, as printed in the standard tables of the
// Mann–Whitney test found in the appendices of statistics texts (reject when U <= c). Each was re-derived in python3
// from the exact null distribution, by brute enumeration of all C(m+n, m) arrangements (sizes up to 10 + 10) and by
// the recursion f(m,n,u) = f(m−1,n,u−n) + f(m,n−1,u) (20 + 20): 2·P[U <= c] <= 0.05 < 2·P[U <= c+1]. (The code
// uses a third method, the Gaussian binomial coefficient.)
TEST(StatsMannWhitney, ExactTwoTailedCriticalValuesMatchPrintedTable) {
  struct Row {
    std::size_t m, n, c;
  };
  for (const Row& row : {Row{3, 5, 0}, Row{5, 5, 2}, Row{6, 6, 5}, Row{7, 7, 8}, Row{8, 8, 13}, Row{10, 10, 23},
                         Row{5, 10, 8}, Row{4, 12, 7}, Row{20, 20, 127}}) {
    const auto [x, y] = data_with_u(row.m, row.n, row.c);
    const TestResult at = mann_whitney_u(x, y);
    EXPECT_TRUE(at.exact);
    EXPECT_EQ(at.statistic, static_cast<double>(row.c));
    EXPECT_LE(at.p_value, 0.05) << row.m << "," << row.n;
    const auto [x1, y1] = data_with_u(row.m, row.n, row.c + 1);
    EXPECT_GT(mann_whitney_u(x1, y1).p_value, 0.05) << row.m << "," << row.n;
    // The mirror image: U of y is m·n − U of x, and the two-sided p is the same.
    EXPECT_EQ(mann_whitney_u(y, x).statistic, static_cast<double>(row.m * row.n - row.c));
    EXPECT_NEAR(mann_whitney_u(y, x).p_value, at.p_value, 1e-15);
  }
  // Exact values: 5+5, U = 2: arrangements with U <= 2 are the partitions of 0, 1, 2 into at most 5 parts
  // <= 5: 1 + 1 + 2 = 4 of C(10,5) = 252, p = 8/252 = 2/63. 20+20, U = 127: 0.04909032518937244 (python3 recursion).
  const auto [x5, y5] = data_with_u(5, 5, 2);
  EXPECT_NEAR(mann_whitney_u(x5, y5).p_value, 2.0 / 63.0, 1e-15);
  const auto [x20, y20] = data_with_u(20, 20, 127);
  EXPECT_NEAR(mann_whitney_u(x20, y20).p_value, 0.04909032518937244, 1e-13);
}

// Hollander & Wolfe, "Nonparametric Statistical Methods" (1973), pp. 68–69: permeability constants of the human
// chorioamnion at term (x) and at 12–26 weeks (y); also the example of R's wilcox.test, which prints W = 35 and the
// one-sided p = 0.1272. Exact two-sided p = 2·P[U >= 35] = 764/3003 (python3 brute enumeration of C(15,5)).
TEST(StatsMannWhitney, HollanderWolfePermeabilityExample) {
  const V x = {0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46};
  const V y = {1.15, 0.88, 0.90, 0.74, 1.21};
  const TestResult r = mann_whitney_u(x, y);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.statistic, 35.0);
  EXPECT_NEAR(r.p_value, 764.0 / 3003.0, 1e-14);
  EXPECT_NEAR(r.p_value / 2.0, 0.1272, 5e-5);
}

// Normal approximation: the standard tie-corrected variance mn/12·((N+1) − Σ(t³ − t)/(N(N−1))) and continuity
// correction ½, as in R's wilcox.test(correct = TRUE). No printed example at hand, so the values were computed in
// python3 by separate code (U by counting pairs, z by the formula, p = 2·NormalDist().cdf(−|z|)).
TEST(StatsMannWhitney, NormalApproximationWithTiesAndForLargeSamples) {
  const V x = {1, 2, 2, 3, 4, 4, 4, 6, 7, 9, 10, 12};
  const V y = {2, 3, 3, 5, 5, 6, 8, 8, 8, 11, 13, 14, 15};
  const TestResult r = mann_whitney_u(x, y);
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.statistic, 51.5);
  EXPECT_NEAR(r.p_value, 0.15585981246385694, 1e-12);  // z = −1.419134482736908
  // 25 + 25 without ties is past the exact range: U = 400, z = (400 − 312.5 − 0.5)/sqrt(25·25·51/12) = 1.68805.
  const auto [x25, y25] = data_with_u(25, 25, 400);
  const TestResult big = mann_whitney_u(x25, y25);
  EXPECT_FALSE(big.exact);
  EXPECT_EQ(big.statistic, 400.0);
  EXPECT_NEAR(big.p_value, 0.09140202473789938, 1e-12);
  // All values equal: no information, p = 1.
  EXPECT_EQ(mann_whitney_u(V{1, 1, 1}, V{1, 1}).p_value, 1.0);
}

TEST(StatsMannWhitney, BadInputThrowsNamingTheFunction) {
  EXPECT_INVALID(mann_whitney_u(V{}, V{1, 2}), "mann_whitney_u");
  EXPECT_INVALID(mann_whitney_u(V{1, 2}, V{}), "mann_whitney_u");
  EXPECT_INVALID(mann_whitney_u(V{1, std::nan("")}, V{1, 2}), "mann_whitney_u");
}

// ---- Welch's t ---------------------------------------------------------------------------------------------------

// Student's sleep data (Cushny & Peebles 1905, as analysed by "Student", Biometrika 6:1–25, 1908): extra hours of
// sleep with two drugs. R's t.test(extra ~ group, data = sleep) (Welch) prints t = −1.8608, df = 17.776,
// p-value = 0.07939. Digits beyond those recomputed in python3 (the Welch–Satterthwaite formula; the p-value by
// Simpson integration of the t density with 200000 intervals).
TEST(StatsWelch, StudentSleepData) {
  const V g1 = {0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0};
  const V g2 = {1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};
  const TestResult r = welch_t(g1, g2);
  EXPECT_NEAR(r.statistic, -1.8608, 5e-5);
  EXPECT_NEAR(r.df, 17.776, 5e-4);
  EXPECT_NEAR(r.p_value, 0.07939, 5e-6);
  EXPECT_NEAR(r.statistic, -1.8608134674868526, 1e-12);
  EXPECT_NEAR(r.df, 17.776473516178495, 1e-10);
  EXPECT_NEAR(r.p_value, 0.07939414018735624, 1e-9);
  EXPECT_FALSE(r.exact);
}

// Printed two-tailed critical values of Student's t (e.g. Fisher & Yates, "Statistical Tables", Table III; any
// textbook t table): t(0.05, 10) = 2.228, t(0.01, 10) = 3.169, t(0.05, 18) = 2.101. Two groups of n with equal
// sample variances give Welch df = 2(n − 1) exactly; shifting one group by d gives t = d / sqrt(2 s²/n). The table's
// rounding to 3 decimals moves p by less than 1e-4 here (|dp/dt| = 2 f(t) < 0.1), so p must be within 2e-4.
TEST(StatsWelch, StudentTTableCriticalValues) {
  struct Row {
    std::size_t n;
    double t, alpha;
  };
  for (const Row& row : {Row{6, 2.228, 0.05}, Row{6, 3.169, 0.01}, Row{10, 2.101, 0.05}}) {
    V base(row.n);
    for (std::size_t i = 0; i < row.n; ++i) base[i] = (i % 2 == 0) ? -1.0 : 1.0;  // mean 0, s² = n/(n − 1)
    const double s2 = static_cast<double>(row.n) / static_cast<double>(row.n - 1);
    const double d = row.t * std::sqrt(2.0 * s2 / static_cast<double>(row.n));
    V shifted = base;
    for (double& v : shifted) v += d;
    const TestResult r = welch_t(shifted, base);
    EXPECT_NEAR(r.df, 2.0 * static_cast<double>(row.n - 1), 1e-12);
    EXPECT_NEAR(r.statistic, row.t, 1e-12);
    EXPECT_NEAR(r.p_value, row.alpha, 2e-4) << row.t;
  }
}

TEST(StatsWelch, BadInputThrowsNamingTheFunction) {
  EXPECT_INVALID(welch_t(V{1.0}, V{1, 2, 3}), "welch_t");
  EXPECT_INVALID(welch_t(V{1, 2, 3}, V{2.0}), "welch_t");
  EXPECT_INVALID(welch_t(V{1, 1, 1}, V{2, 2}), "welch_t");  // both constant: t undefined
  EXPECT_INVALID(welch_t(V{1, INFINITY}, V{2, 3}), "welch_t");
}

// ---- ranks and correlations --------------------------------------------------------------------------------------

TEST(StatsCorrelation, MidRanksByHand) {
  EXPECT_EQ(ranks(V{10, 20, 20, 30}), (V{1, 2.5, 2.5, 4}));
  EXPECT_EQ(ranks(V{3, 1, 2}), (V{3, 1, 2}));
  EXPECT_EQ(ranks(V{5, 5, 5}), (V{2, 2, 2}));
  EXPECT_EQ(ranks(V{2, 1, 2, 1, 3}), (V{3.5, 1.5, 3.5, 1.5, 5}));
  EXPECT_TRUE(ranks(V{}).empty());
  EXPECT_INVALID(ranks(V{1, std::nan("")}), "ranks");
}

// Anscombe, "Graphs in statistical analysis", The American Statistician 27:17–21 (1973): four data sets with the
// same printed summary, among it "regression sum of squares 27.50, residual sum of squares of y 13.75, multiple
// R² = 0.667". The summary is shared only as far as the y-values' two decimals allow: recomputed, the residual sums
// of squares are 13.74 to 13.78 and R² = 0.6662 to 0.6667, so the printed R² is checked to ±1e-3 (one unit of its
// last digit). The full-precision r were recomputed in python3 with the one-pass formula
// (n Σxy − Σx Σy)/sqrt((n Σx² − (Σx)²)(n Σy² − (Σy)²)) (the code uses centred sums) and the p-values (df = 9) by
// Simpson integration of the t density; those are the tight checks.
TEST(StatsCorrelation, AnscombeQuartetPearson) {
  const V x = {10, 8, 13, 9, 11, 14, 6, 4, 12, 7, 5};
  const V x4 = {8, 8, 8, 8, 8, 8, 8, 19, 8, 8, 8};
  const std::vector<V> ys = {{8.04, 6.95, 7.58, 8.81, 8.33, 9.96, 7.24, 4.26, 10.84, 4.82, 5.68},
                             {9.14, 8.14, 8.74, 8.77, 9.26, 8.10, 6.13, 3.10, 9.13, 7.26, 4.74},
                             {7.46, 6.77, 12.74, 7.11, 7.81, 8.84, 6.08, 5.39, 8.15, 6.42, 5.73},
                             {6.58, 5.76, 7.71, 8.84, 8.47, 7.04, 5.25, 12.50, 5.56, 7.91, 6.89}};
  const double want_r[] = {0.816420516344843, 0.8162365060002422, 0.8162867394895953, 0.8165214368885068};
  const double want_p[] = {0.002169628873086693, 0.002178816236915293, 0.002176305279240509, 0.002164602347189404};
  for (std::size_t k = 0; k < 4; ++k) {
    const Correlation c = pearson(k == 3 ? x4 : x, ys[k]);
    EXPECT_EQ(c.n, 11u);
    EXPECT_NEAR(c.r * c.r, 0.667, 1e-3) << k;  // the printed value
    EXPECT_NEAR(c.r, want_r[k], 1e-12) << k;
    EXPECT_NEAR(c.p_value, want_p[k], 1e-10) << k;
  }
  // Exact lines: r = ±1 and p = 0.
  EXPECT_EQ(pearson(V{1, 2, 3, 4}, V{3, 5, 7, 9}).r, 1.0);
  EXPECT_EQ(pearson(V{1, 2, 3, 4}, V{3, 5, 7, 9}).p_value, 0.0);
  EXPECT_EQ(pearson(V{1, 2, 3, 4}, V{4, 3, 2, 1}).r, -1.0);
}

// The worked example of Wikipedia's "Spearman's rank correlation coefficient" (IQ against hours of TV per week,
// n = 10, no ties): Σd² = 194, ρ = 1 − 6·194/(10·99) = −29/165 = −0.175757…, p = 0.627188 from the t
// distribution. Checked in python3: Σd² from the ranks, the fraction exactly, p by Simpson integration (df = 8).
TEST(StatsCorrelation, SpearmanIqAgainstTelevision) {
  const V iq = {106, 100, 86, 101, 99, 103, 97, 113, 112, 110};
  const V tv = {7, 27, 2, 50, 28, 29, 20, 12, 6, 17};
  const Correlation c = spearman(iq, tv);
  EXPECT_EQ(c.n, 10u);
  EXPECT_NEAR(c.r, -29.0 / 165.0, 1e-14);
  EXPECT_NEAR(c.p_value, 0.627188, 5e-7);
  EXPECT_NEAR(c.p_value, 0.6271883447764843, 1e-10);
}

TEST(StatsCorrelation, SpearmanWithTiesIsPearsonOnMidRanks) {
  // By hand: mid-ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4); centred sums Sxy = 9/2, Sxx = 9/2, Syy = 5, so
  // ρ = (9/2)/sqrt(45/2) = 3/sqrt(10). A monotone transform of x (cubing) changes nothing.
  EXPECT_NEAR(spearman(V{1, 2, 2, 3}, V{1, 3, 2, 4}).r, 3.0 / std::sqrt(10.0), 1e-15);
  EXPECT_NEAR(spearman(V{1, 8, 8, 27}, V{1, 3, 2, 4}).r, 3.0 / std::sqrt(10.0), 1e-15);
}

// Wikipedia's "Partial correlation" example: X = (2, 4, 15, 20), Y = (1, 2, 3, 4), Z = (0, 0, 1, 1), partial
// correlation of X and Y given Z = 0.919145. Checked in python3 by a different method: the Pearson correlation of
// the residuals of the least-squares regressions of X on Z and Y on Z (0.9191450300180578); p-value with df =
// n − 3 = 1 by Simpson integration (0.2577621168183014).
TEST(StatsCorrelation, PartialCorrelationWikipediaExample) {
  const Correlation c = partial_pearson(V{2, 4, 15, 20}, V{1, 2, 3, 4}, V{0, 0, 1, 1});
  EXPECT_EQ(c.n, 4u);
  EXPECT_NEAR(c.r, 0.919145, 5e-7);
  EXPECT_NEAR(c.r, 0.9191450300180578, 1e-13);
  EXPECT_NEAR(c.p_value, 0.2577621168183014, 1e-9);
}

TEST(StatsCorrelation, BadInputThrowsNamingTheFunction) {
  EXPECT_INVALID(pearson(V{1, 2, 3}, V{1, 2}), "pearson");
  EXPECT_INVALID(pearson(V{1, 2}, V{1, 2}), "pearson");          // n < 3
  EXPECT_INVALID(pearson(V{1, 1, 1}, V{1, 2, 3}), "pearson");    // constant x
  EXPECT_INVALID(pearson(V{1, 2, 3}, V{1, NAN, 3}), "pearson");  // not finite
  EXPECT_INVALID(spearman(V{1, 2, 3}, V{1, 2, 3, 4}), "spearman");
  EXPECT_INVALID(spearman(V{1, 2, 3}, V{7, 7, 7}), "spearman");                            // constant ranks
  EXPECT_INVALID(partial_pearson(V{1, 2, 3}, V{1, 2, 4}, V{0, 1, 1}), "partial_pearson");  // n < 4
  EXPECT_INVALID(partial_pearson(V{1, 2, 3, 4}, V{1, 2, 4, 3}, V{0, 1, 1}), "partial_pearson");
  EXPECT_INVALID(partial_pearson(V{1, 2, 3, 4}, V{1, 2, 4, 3}, V{2, 4, 6, 8}), "partial_pearson");  // x = z/2
}

}  // namespace
}  // namespace kvconf::analysis
