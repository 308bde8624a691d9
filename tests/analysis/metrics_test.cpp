// Unit tests of analysis/metrics against closed forms: two-token softmaxes by hand, softmax shift invariance, JS
// symmetry and its ln 2 ceiling, top-2 ties, drift of orthogonal and parallel vectors, flip indices.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <stdexcept>
#include <vector>

#include "kvconf/analysis/metrics.hpp"

namespace kvconf::analysis {
namespace {

using V = std::vector<float>;

// Softmax of (0, x) in closed form: (1 / (1 + e^x), e^x / (1 + e^x)).
std::pair<double, double> soft2(float x) {
  const double e = std::exp(static_cast<double>(x));
  return {1.0 / (1.0 + e), e / (1.0 + e)};
}

TEST(Metrics, LogSoftmaxOfTwoTokens) {
  const float x = 1.5f;
  const auto [p0, p1] = soft2(x);
  const auto l = log_softmax(V{0.0f, x});
  ASSERT_EQ(l.size(), 2u);
  EXPECT_NEAR(l[0], std::log(p0), 1e-15);
  EXPECT_NEAR(l[1], std::log(p1), 1e-15);
  // Large logits do not overflow (max-subtracted): softmax(1000, 1000) = (1/2, 1/2).
  const auto big = log_softmax(V{1000.0f, 1000.0f});
  EXPECT_NEAR(big[0], -std::numbers::ln2, 1e-15);
  EXPECT_THROW(log_softmax(V{}), std::invalid_argument);
}

TEST(Metrics, KlOfTwoTokenSoftmaxesByHand) {
  const float a = static_cast<float>(std::log(3.0)), b = 0.25f;
  const auto [p0, p1] = soft2(a);
  const auto [q0, q1] = soft2(b);
  const double pq = p0 * std::log(p0 / q0) + p1 * std::log(p1 / q1);
  const double qp = q0 * std::log(q0 / p0) + q1 * std::log(q1 / p1);
  EXPECT_NEAR(kl_divergence(V{0, a}, V{0, b}), pq, 1e-15);
  EXPECT_NEAR(kl_divergence(V{0, b}, V{0, a}), qp, 1e-15);
  EXPECT_GT(std::fabs(pq - qp), 1e-3);  // KL is not symmetric: the two directions are really distinguished
  // p = (1/4, 3/4), q = (1/2, 1/2) up to the float rounding of ln 3: KL = ¾ ln(3/2) − ¼ ln 2.
  EXPECT_NEAR(kl_divergence(V{0, a}, V{0, 0}), 0.75 * std::log(1.5) - 0.25 * std::numbers::ln2, 1e-7);
}

TEST(Metrics, KlIsZeroForShiftedLogits) {
  const V x = {1.0f, 2.0f, 3.0f, -4.0f}, y = {11.0f, 12.0f, 13.0f, 6.0f};  // y = x + 10 exactly
  EXPECT_LE(kl_divergence(x, y), 1e-14);
  EXPECT_EQ(kl_divergence(x, x), 0.0);
  EXPECT_EQ(js_divergence(x, x), 0.0);
  EXPECT_LE(js_divergence(x, y), 1e-14);
}

TEST(Metrics, KlMatchesTheDefinitionOnRandomLogits) {
  std::mt19937_64 g(4242);
  std::normal_distribution<double> nd(0.0, 3.0);
  for (int trial = 0; trial < 20; ++trial) {
    V x(50), y(50);
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(nd(g));
      y[i] = static_cast<float>(x[i] + 0.3 * nd(g));
    }
    // Softmax as p_i = 1 / Σ_j exp(x_j − x_i): a different formula from the library's.
    const auto prob = [](const V& z, std::size_t i) {
      double s = 0.0;
      for (float v : z) s += std::exp(static_cast<double>(v) - z[i]);
      return 1.0 / s;
    };
    double kl = 0.0, js = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double p = prob(x, i), q = prob(y, i), m = 0.5 * (p + q);
      kl += p * std::log(p / q);
      js += 0.5 * p * std::log(p / m) + 0.5 * q * std::log(q / m);
    }
    EXPECT_NEAR(kl_divergence(x, y), kl, 1e-12 * (1 + kl)) << trial;
    EXPECT_NEAR(js_divergence(x, y), js, 1e-12 * (1 + js)) << trial;
    EXPECT_GE(kl_divergence(x, y), 0.0);
  }
}

TEST(Metrics, JsIsSymmetricAndAtMostLn2) {
  const float a = 2.0f, b = -1.0f;
  const auto [p0, p1] = soft2(a);
  const auto [q0, q1] = soft2(b);
  const double m0 = 0.5 * (p0 + q0), m1 = 0.5 * (p1 + q1);
  const double js =
      0.5 * (p0 * std::log(p0 / m0) + p1 * std::log(p1 / m1)) + 0.5 * (q0 * std::log(q0 / m0) + q1 * std::log(q1 / m1));
  EXPECT_NEAR(js_divergence(V{0, a}, V{0, b}), js, 1e-15);
  EXPECT_EQ(js_divergence(V{0, a}, V{0, b}), js_divergence(V{0, b}, V{0, a}));
  // Disjoint supports (exp(−1000) = 0 in double): exactly ln 2, the maximum.
  EXPECT_NEAR(js_divergence(V{0, -1000}, V{-1000, 0}), std::numbers::ln2, 1e-15);
  EXPECT_LE(js_divergence(V{0, -1000}, V{-1000, 0}), std::numbers::ln2);
  EXPECT_THROW(js_divergence(V{1, 2}, V{1}), std::invalid_argument);
}

TEST(Metrics, Top2WithTies) {
  Top2 t = top2(V{1, 5, 5, 3});
  EXPECT_EQ(t.top1, 1);
  EXPECT_EQ(t.top2, 2);
  EXPECT_EQ(t.margin, 0.0);
  t = top2(V{5, 1, 4, 4});
  EXPECT_EQ(t.top1, 0);
  EXPECT_EQ(t.top2, 2);
  EXPECT_EQ(t.margin, 1.0);
  t = top2(V{1, 2});
  EXPECT_EQ(t.top1, 1);
  EXPECT_EQ(t.top2, 0);
  EXPECT_EQ(t.margin, 1.0);
  t = top2(V{0.5f, 0.25f, 3.0f, 2.0f, 3.0f});
  EXPECT_EQ(t.top1, 2);
  EXPECT_EQ(t.top2, 4);
  t = top2(V{std::nanf(""), 1, 0});
  EXPECT_EQ(t.top1, 1);
  EXPECT_EQ(t.top2, 2);
  EXPECT_THROW(top2(V{1}), std::invalid_argument);
}

TEST(Metrics, MaxAbsDiff) {
  EXPECT_EQ(max_abs_diff(V{1, 2, 3}, V{1, -2, 3.5f}), 4.0);
  EXPECT_EQ(max_abs_diff(V{1, 2}, V{1, 2}), 0.0);
  EXPECT_TRUE(std::isnan(max_abs_diff(V{1, std::nanf("")}, V{1, 2})));
  EXPECT_THROW(max_abs_diff(V{1, 2}, V{1}), std::invalid_argument);
  EXPECT_THROW(max_abs_diff(V{}, V{}), std::invalid_argument);
}

TEST(Metrics, DriftOfOrthogonalParallelAndOpposite) {
  Drift d = drift(V{1, 0}, V{0, 1});
  EXPECT_NEAR(d.cosine, 0.0, 1e-15);
  EXPECT_NEAR(d.l2, std::sqrt(2.0), 1e-15);
  d = drift(V{1, 2}, V{2, 4});
  EXPECT_NEAR(d.cosine, 1.0, 1e-15);
  EXPECT_NEAR(d.l2, std::sqrt(5.0), 1e-15);
  d = drift(V{1, 2}, V{-1, -2});
  EXPECT_NEAR(d.cosine, -1.0, 1e-15);
  // Identical vectors: exactly 1 and 0 (the "prompt states are bitwise equal" checks rely on it).
  const V x = {3.8645541667938232f, 4.348336696624756f,   0.19900742173194885f, -2.293630838394165f,
               -3.276519536972046f, 0.09400355070829391f, -3.0663094520568848f};  // aa / (√aa·√aa) != 1 here
  d = drift(x, x);
  EXPECT_EQ(d.cosine, 1.0);
  EXPECT_EQ(d.l2, 0.0);
  d = drift(V{0, 0}, V{0, 0});
  EXPECT_EQ(d.cosine, 1.0);
  EXPECT_EQ(d.l2, 0.0);
  // 3-4-5: a = (3, 4), b = (4, 3): cos = 24 / 25, ‖a − b‖ = √2.
  d = drift(V{3, 4}, V{4, 3});
  EXPECT_NEAR(d.cosine, 24.0 / 25.0, 1e-15);
  EXPECT_NEAR(d.l2, std::sqrt(2.0), 1e-15);
}

TEST(Metrics, FlipIndex) {
  using I = std::vector<int>;
  EXPECT_FALSE(flip_index(I{1, 2, 3}, I{1, 2, 3}).has_value());
  EXPECT_EQ(flip_index(I{1, 2, 3}, I{1, 5, 3}), 1u);
  EXPECT_EQ(flip_index(I{7}, I{8}), 0u);
  EXPECT_EQ(flip_index(I{1, 2}, I{1, 2, 3}), 2u);  // length difference counts at its end
  EXPECT_FALSE(flip_index(I{}, I{}).has_value());
}

TEST(Metrics, CheckSameLengthNamesTheFunction) {
  try {
    check_same_length("kl_divergence", 3, 4);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kl_divergence"), std::string::npos);
  }
  EXPECT_THROW(check_same_length("f", 0, 0), std::invalid_argument);
  EXPECT_NO_THROW(check_same_length("f", 2, 2));
}

}  // namespace
}  // namespace kvconf::analysis
