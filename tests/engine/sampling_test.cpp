// Unit tests of engine/sampling: greedy ties, top-k / top-p against hand-computed distributions and thresholds,
// temperature, the SplitMix64 step draw against published reference outputs, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "kvconf/engine/sampling.hpp"

namespace kvconf::engine {
namespace {

Sampler make(Strategy st, std::size_t k = 50, double p = 0.9, double t = 1.0) {
  Sampler s;
  s.strategy = st;
  s.top_k = k;
  s.top_p = p;
  s.temperature = t;
  return s;
}

// logits ln 1, ln 2, ln 5: probabilities 1/8, 2/8, 5/8; walked in vocabulary order (as torch.multinomial does) the
// cumulative masses are 0.125, 0.375, 1.
const std::vector<float> kThree = {0.0f, static_cast<float>(std::log(2.0)), static_cast<float>(std::log(5.0))};

TEST(Sampling, GreedyPicksLowestIndexOnTies) {
  const Sampler g = make(Strategy::greedy);
  EXPECT_EQ(sample(g, std::vector<float>{1, 3, 3, 2}, 0.5), 1);
  EXPECT_EQ(sample(g, std::vector<float>{-1, -1, -1}, 0.0), 0);
  EXPECT_EQ(sample(g, std::vector<float>{std::nanf(""), 1, 2}, 0.0), 2);
  // Greedy ignores the draw and the temperature.
  Sampler cold = g;
  cold.temperature = 0.0;
  EXPECT_EQ(sample(cold, kThree, 0.99), 2);
}

TEST(Sampling, TopPThresholdsOfAHandComputedDistribution) {
  const Sampler all = make(Strategy::top_p, 50, 1.0);  // p = 1 keeps everything: plain sampling
  EXPECT_EQ(sample(all, kThree, 0.0), 0);
  EXPECT_EQ(sample(all, kThree, 0.12), 0);
  EXPECT_EQ(sample(all, kThree, 0.13), 1);
  EXPECT_EQ(sample(all, kThree, 0.37), 1);
  EXPECT_EQ(sample(all, kThree, 0.38), 2);
  EXPECT_EQ(sample(all, kThree, std::nextafter(1.0, 0.0)), 2);
  // p = 0.6: the single most likely token already reaches it.
  for (double u : {0.0, 0.5, 0.99}) EXPECT_EQ(sample(make(Strategy::top_p, 50, 0.6), kThree, u), 2) << u;
  // p = 0.7: tokens 2 and 1 (mass 0.875), renormalized 5/7 and 2/7, walked as 1 then 2: threshold 2/7 = 0.2857...
  const Sampler p7 = make(Strategy::top_p, 50, 0.7);
  EXPECT_EQ(sample(p7, kThree, 0.28), 1);
  EXPECT_EQ(sample(p7, kThree, 0.29), 2);
  EXPECT_EQ(sample(p7, kThree, 0.99), 2);
  // p = 0.9 > 0.875: all three.
  EXPECT_EQ(sample(make(Strategy::top_p, 50, 0.9), kThree, 0.1), 0);
}

TEST(Sampling, TopKKeepsTheKLargest) {
  const Sampler k2 = make(Strategy::top_k, 2);  // tokens 1, 2 renormalized 2/7, 5/7: threshold 2/7
  EXPECT_EQ(sample(k2, kThree, 0.28), 1);
  EXPECT_EQ(sample(k2, kThree, 0.29), 2);
  EXPECT_EQ(sample(k2, kThree, 0.999), 2);
  const Sampler k9 = make(Strategy::top_k, 9);  // k beyond the vocabulary keeps all
  EXPECT_EQ(sample(k9, kThree, 0.1), 0);
  EXPECT_EQ(sample(k9, kThree, 0.2), 1);
  EXPECT_EQ(sample(k9, kThree, 0.88), 2);
}

TEST(Sampling, TemperatureFlattensAndSharpens) {
  // T = 2: weights 1, sqrt 2, sqrt 5; cumulative in vocabulary order 1/s = 0.2150..., (1 + sqrt2)/s = 0.5191...
  const double s = 1.0 + std::sqrt(2.0) + std::sqrt(5.0);
  const double c1 = 1.0 / s, c2 = (1.0 + std::sqrt(2.0)) / s;
  const Sampler hot = make(Strategy::top_k, 50, 0.9, 2.0);
  EXPECT_EQ(sample(hot, kThree, c1 - 1e-6), 0);
  EXPECT_EQ(sample(hot, kThree, c1 + 1e-6), 1);
  EXPECT_EQ(sample(hot, kThree, c2 - 1e-6), 1);
  EXPECT_EQ(sample(hot, kThree, c2 + 1e-6), 2);
  EXPECT_EQ(sample(make(Strategy::top_k), kThree, 0.3), 1);  // T = 1: 0.125 < 0.3 < 0.375
  // T = 0.01: p(2) = 1 / (1 + 2.5^-100 + 5^-100): every draw below 1 - 1e-30 picks token 2.
  EXPECT_EQ(sample(make(Strategy::top_p, 50, 1.0, 0.01), kThree, std::nextafter(1.0, 0.0)), 2);
}

TEST(Sampling, TopK1AndTinyTopPAreGreedy) {
  std::mt19937_64 g(12345);
  std::uniform_int_distribution<int> pick(0, 7);  // small integer logits: many ties
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> z(40);
    for (auto& v : z) v = static_cast<float>(pick(g));
    int expect = 0;  // arg-max, lowest index, computed here
    for (int i = 1; i < 40; ++i)
      if (z[i] > z[expect]) expect = i;
    const double u = step_draw(99, static_cast<std::size_t>(trial));
    EXPECT_EQ(sample(make(Strategy::top_k, 1), z, u), expect) << trial;
    EXPECT_EQ(sample(make(Strategy::top_p, 50, 1e-9), z, u), expect) << trial;
    EXPECT_EQ(sample(make(Strategy::greedy), z, u), expect) << trial;
  }
}

TEST(Sampling, FrequenciesFollowTheDistribution) {
  // 40000 draws from 1/8, 2/8, 5/8: each count within 6 binomial standard errors of N p.
  const std::size_t n = 40000;
  std::size_t count[3] = {0, 0, 0};
  const Sampler all = make(Strategy::top_p, 50, 1.0);
  for (std::size_t t = 0; t < n; ++t) ++count[sample(all, kThree, step_draw(2024, t))];
  const double p[3] = {0.125, 0.25, 0.625};
  for (int i = 0; i < 3; ++i) {
    const double se = std::sqrt(n * p[i] * (1 - p[i]));
    EXPECT_NEAR(static_cast<double>(count[i]), n * p[i], 6 * se) << "token " << i;
  }
}

TEST(Sampling, StepDrawIsSplitMix64) {
  // Reference outputs of splitmix64.c (Vigna) seeded with 0: e220a8397b1dcdaf, 6e789e6aa1b965f4, 06c45d188009454f.
  const std::uint64_t ref[3] = {0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull, 0x06c45d188009454full};
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(step_draw(0, i), std::ldexp(static_cast<double>(ref[i] >> 11), -53));
  double sum = 0.0;
  const std::size_t n = 100000;
  for (std::size_t t = 0; t < n; ++t) {
    const double u = step_draw(7, t);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 6 * std::sqrt(1.0 / 12 / n));  // mean of U[0,1): s.e. 1/sqrt(12 N)
  EXPECT_NE(step_draw(1, 0), step_draw(2, 0));
  EXPECT_EQ(step_draw(5, 3), step_draw(5, 3));
}

TEST(Sampling, NamesAndParse) {
  EXPECT_EQ(make(Strategy::greedy).name(), "greedy");
  EXPECT_EQ(make(Strategy::top_k).name(), "topk50_t1");
  EXPECT_EQ(make(Strategy::top_p).name(), "topp0.9_t1");
  EXPECT_EQ(make(Strategy::top_k, 5, 0.9, 0.7).name(), "topk5_t0.7");
  EXPECT_EQ(parse_strategy("greedy"), Strategy::greedy);
  EXPECT_EQ(parse_strategy("topk"), Strategy::top_k);
  EXPECT_EQ(parse_strategy("topp"), Strategy::top_p);
  try {
    parse_strategy("beam");
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("greedy, topk, topp"), std::string::npos) << e.what();
  }
}

TEST(Sampling, InvalidArgumentsThrow) {
  EXPECT_THROW(sample(make(Strategy::greedy), std::vector<float>{}, 0.5), std::invalid_argument);
  EXPECT_THROW(sample(make(Strategy::top_k), std::vector<float>{}, 0.5), std::invalid_argument);
  EXPECT_THROW(sample(make(Strategy::top_k, 0), kThree, 0.5), std::invalid_argument);
  EXPECT_THROW(sample(make(Strategy::top_k, 5, 0.9, 0.0), kThree, 0.5), std::invalid_argument);
  EXPECT_THROW(sample(make(Strategy::top_p, 5, 0.9, -1.0), kThree, 0.5), std::invalid_argument);
  EXPECT_THROW(sample(make(Strategy::top_p, 5, 0.0), kThree, 0.5), std::invalid_argument);
  EXPECT_THROW(sample(make(Strategy::top_p, 5, 1.5), kThree, 0.5), std::invalid_argument);
  EXPECT_THROW(sample(make(Strategy::top_p, 5, std::nan("")), kThree, 0.5), std::invalid_argument);
}

}  // namespace
}  // namespace kvconf::engine
