// Unit tests of the accumulation-order primitives (numerics/accumulate.hpp): hand-computed exact
// expectations, equalities between orders that must coincide, and input validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/numerics/arith.hpp"
#include "test_support.hpp"

namespace kvconf {
namespace {

using namespace kvconf::test;

// Random values of format f: N(0,1) scaled by 2^[−4, 4].
std::vector<double> random_values(Format f, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_int_distribution<int> e(-4, 4);
  std::vector<double> v(n);
  for (auto& x : v) x = round_to(f, std::ldexp(g(rng), e(rng)));
  return v;
}

TEST(AccumulateValidation, RejectsBadArguments) {
  const AccumSpec s = spec_of(Format::fp16, Format::fp32, Format::fp32);
  const std::vector<double> a{1.0, 2.0}, b{1.0};
  EXPECT_THROW(dot(s, Sequential{}, a, b), std::invalid_argument);
  EXPECT_THROW(dot(s, Blocked{0}, a, a), std::invalid_argument);
  EXPECT_THROW(dot(s, SplitK{0}, a, a), std::invalid_argument);
  EXPECT_THROW(sum(s, Blocked{0}, a), std::invalid_argument);
  const std::vector<double> not_fp16{1.0 + p2(-20)};
  EXPECT_THROW(dot(s, Sequential{}, not_fp16, not_fp16), std::invalid_argument);
  EXPECT_THROW(sum(s, Pairwise{}, not_fp16), std::invalid_argument);
  AccumSpec bad_tc = spec_of(Format::fp16, Format::bf16, Format::bf16);
  EXPECT_THROW(dot(bad_tc, TensorCore{}, a, a), std::invalid_argument);
  EXPECT_THROW(dot(bad_tc, SplitK{2, SplitKCombine::accumulator, TensorCoreParams::h100()}, a, a),
               std::invalid_argument);
  AccumSpec fp64_in = spec_of(Format::fp64, Format::fp64, Format::fp64);
  EXPECT_THROW(dot(fp64_in, Sequential{}, a, a), std::invalid_argument);
  try {
    dot(s, Sequential{}, a, b);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("differ in length"), std::string::npos) << e.what();
  }
}

TEST(AccumulateOrders, EmptyInputIsZero) {
  const AccumSpec s = spec_of(Format::fp16, Format::fp32, Format::fp16);
  const std::vector<double> none;
  for (const Order& o : {Order{Sequential{}}, Order{Pairwise{}}, Order{Blocked{4}}, Order{SplitK{3}},
                         Order{SplitK{3, SplitKCombine::slices_rounded_to_output}}, Order{TensorCore{}}}) {
    EXPECT_EQ(dot(s, o, none, none), 0.0) << order_name(o);
    EXPECT_EQ(sum(s, o, none), 0.0) << order_name(o);
  }
}

// fp16 sum of [1, 2^-11, 2^-11, 2^-11]: sequentially every 1 + 2^-11 is a tie that rounds back to 1;
// pairwise, (2^-11 + 2^-11) = 2^-10 survives: the two results differ by exactly 2^-10.
TEST(AccumulateOrders, SequentialAndPairwiseFp16SumsDifferByKnownAmount) {
  const AccumSpec s = spec_of(Format::fp16, Format::fp16, Format::fp16);
  const std::vector<double> x{1.0, p2(-11), p2(-11), p2(-11)};
  const double seq = sum(s, Sequential{}, x);
  const double pw = sum(s, Pairwise{}, x);
  EXPECT_EQ(seq, 1.0);
  EXPECT_EQ(pw, 1.0 + p2(-10));
  EXPECT_EQ(pw - seq, p2(-10));
  // Exact sum is 1 + 3·2^-11: pairwise is within half an ulp (2^-11), sequential is 3·2^-11 away.
}

// Pins the documented pairing: level 1 pairs (0,1), a trailing element is carried up unchanged.
// [1, 2^-11, 2^-11]: (1 + 2^-11) = 1 (tie to even), then 1 + 2^-11 = 1. Pairing (x1 + x2) first would
// give 1 + 2^-10.
TEST(AccumulateOrders, PairwiseCombinesAdjacentPairsAndCarriesTheOddElement) {
  const AccumSpec s = spec_of(Format::fp16, Format::fp16, Format::fp16);
  EXPECT_EQ(sum(s, Pairwise{}, std::vector<double>{1.0, p2(-11), p2(-11)}), 1.0);
  EXPECT_EQ(sum(s, Pairwise{}, std::vector<double>{p2(-11), p2(-11), 1.0}), 1.0 + p2(-10));
  // Five terms: ((a+b) + (c+d)) + e.
  EXPECT_EQ(sum(s, Pairwise{}, std::vector<double>{p2(-11), p2(-11), p2(-11), p2(-11), 1.0}), 1.0 + p2(-9));
}

// FMA vs product-then-add in fp16: x1·y1 = 2^-11·(1 + 2^-11 − 2^-21) rounds to 2^-11 on its own, so
// 1 + fl(x1·y1) is a tie (→ 1); fused, 1 + x1·y1 is above the tie (→ 1 + 2^-10).
TEST(AccumulateOrders, FusedAndUnfusedSequentialDotsDiffer) {
  const std::vector<double> x{1.0, 1.0 + p2(-10)};
  const std::vector<double> y{1.0, p2(-11) - p2(-22)};
  EXPECT_EQ(dot(spec_of(Format::fp16, Format::fp16, Format::fp16, true), Sequential{}, x, y), 1.0 + p2(-10));
  EXPECT_EQ(dot(spec_of(Format::fp16, Format::fp16, Format::fp16, false), Sequential{}, x, y), 1.0);
}

TEST(AccumulateOrders, EquivalentOrdersAgreeBitwise) {
  const Format fmts[][3] = {{Format::fp16, Format::fp16, Format::fp16},
                            {Format::fp16, Format::fp32, Format::fp16},
                            {Format::bf16, Format::bf16, Format::bf16},
                            {Format::bf16, Format::fp32, Format::fp32}};
  int cases = 0;
  for (const auto& f : fmts) {
    for (bool fused : {true, false}) {
      const AccumSpec s = spec_of(f[0], f[1], f[2], fused);
      AccumSpec unfused = s;
      unfused.fma = false;
      for (std::size_t n : {1u, 2u, 7u, 16u, 100u, 257u}) {
        const auto x = random_values(s.in, n, 1000 + n);
        const auto y = random_values(s.in, n, 2000 + n);
        const double seq = dot(s, Sequential{}, x, y);
        EXPECT_EQ(dot(s, SplitK{1}, x, y), seq) << "split-K s=1, n=" << n;
        EXPECT_EQ(dot(s, SplitK{1, SplitKCombine::slices_rounded_to_output}, x, y), seq) << "n=" << n;
        EXPECT_EQ(dot(s, Blocked{n}, x, y), seq) << "blocked b=n, n=" << n;
        EXPECT_EQ(dot(s, Blocked{n + 5}, x, y), seq) << "blocked b>n, n=" << n;
        EXPECT_EQ(dot(s, Blocked{1}, x, y), dot(unfused, Sequential{}, x, y)) << "blocked b=1, n=" << n;
        for (std::size_t sk : {2u, 3u, 4u, 8u}) {
          const std::size_t L = (n + sk - 1) / sk;
          EXPECT_EQ(dot(s, SplitK{sk}, x, y), dot(s, Blocked{L}, x, y)) << "split-K s=" << sk << " n=" << n;
        }
        // Sums are dot products with y = 1 in the unfused form.
        const std::vector<double> ones(n, 1.0);
        for (const Order& o : {Order{Sequential{}}, Order{Pairwise{}}, Order{Blocked{5}}, Order{SplitK{3}}})
          EXPECT_EQ(sum(s, o, x), dot(unfused, o, x, ones)) << order_name(o) << " n=" << n;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 48);
}

// The documented split-K cut: L = ceil(n/s); n = 10, s = 4 gives slices [0,3) [3,6) [6,9) [9,10).
TEST(AccumulateOrders, SplitKSlicesAndCombines) {
  const AccumSpec s = spec_of(Format::fp16, Format::fp32, Format::fp16);
  const auto x = random_values(Format::fp16, 10, 7);
  const auto y = random_values(Format::fp16, 10, 8);
  const auto chain = [&](std::size_t lo, std::size_t hi) {
    double a = mul(Format::fp32, x[lo], y[lo]);
    for (std::size_t i = lo + 1; i < hi; ++i) a = fma(Format::fp32, x[i], y[i], a);
    return a;
  };
  const double p0 = chain(0, 3), p1 = chain(3, 6), p2v = chain(6, 9), p3 = chain(9, 10);
  const double acc = round_to(Format::fp16, add(Format::fp32, add(Format::fp32, add(Format::fp32, p0, p1), p2v), p3));
  EXPECT_EQ(dot(s, SplitK{4}, x, y), acc);
  const auto r = [](double v) { return round_to(Format::fp16, v); };
  const double out = add(Format::fp16, add(Format::fp16, add(Format::fp16, r(p0), r(p1)), r(p2v)), r(p3));
  EXPECT_EQ(dot(s, SplitK{4, SplitKCombine::slices_rounded_to_output}, x, y), out);
  // n = 9, s = 4: L = 3, three slices and one empty one, skipped.
  const std::span<const double> x9(x.data(), 9), y9(y.data(), 9);
  EXPECT_EQ(dot(s, SplitK{4}, x9, y9), round_to(Format::fp16, add(Format::fp32, add(Format::fp32, p0, p1), p2v)));
  EXPECT_EQ(order_name(SplitK{4, SplitKCombine::slices_rounded_to_output}), "splitk4_out");
}

TEST(AccumulateOrders, FinalRoundingToOutput) {
  const auto x = random_values(Format::fp16, 300, 11);
  const auto y = random_values(Format::fp16, 300, 12);
  for (const Order& o : {Order{Sequential{}}, Order{Pairwise{}}, Order{Blocked{16}}, Order{TensorCore{}}}) {
    const double wide = dot(spec_of(Format::fp16, Format::fp32, Format::fp32), o, x, y);
    EXPECT_EQ(dot(spec_of(Format::fp16, Format::fp32, Format::fp16), o, x, y), round_to(Format::fp16, wide))
        << order_name(o);
  }
}

TEST(AccumulateOrders, TensorCoreOrderIsTheChainedBlockModel) {
  const auto x = random_values(Format::fp16, 100, 21);
  const auto y = random_values(Format::fp16, 100, 22);
  const AccumSpec s = spec_of(Format::fp16, Format::fp32, Format::fp32);
  for (const auto& p : {TensorCoreParams::v100(), TensorCoreParams::a100(), TensorCoreParams::h100()}) {
    EXPECT_EQ(dot(s, TensorCore{p}, x, y), tensor_core_dot(p, Format::fp16, Format::fp32, x, y));
    // Split-K with tensor-core slices: slices are independent chains from c = 0.
    const double a =
        tensor_core_dot(p, Format::fp16, Format::fp32, std::span(x).subspan(0, 50), std::span(y).subspan(0, 50));
    const double b = tensor_core_dot(p, Format::fp16, Format::fp32, std::span(x).subspan(50), std::span(y).subspan(50));
    EXPECT_EQ(dot(s, SplitK{2, SplitKCombine::accumulator, p}, x, y), add(Format::fp32, a, b));
  }
  EXPECT_EQ(order_name(TensorCore{TensorCoreParams::h100()}), "tc16n2");
  EXPECT_EQ(order_name(SplitK{4, SplitKCombine::accumulator, TensorCoreParams::a100()}), "splitk4_acc_tc8n1");
}

// Directed rounding is honoured at every step: RZ sums of positive terms never exceed RN-free exact sums,
// RU never fall below.
TEST(AccumulateOrders, DirectedModesBracketTheExactSum) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> x(500);
  for (auto& v : x) v = round_to(Format::fp16, u(rng));
  double exact = 0.0;  // 500 fp16 values in [0,1]: exact in double (multiples of 2^-24, sum < 2^9)
  for (double v : x) exact += v;
  for (const Order& o : {Order{Sequential{}}, Order{Pairwise{}}, Order{Blocked{7}}}) {
    const double down = sum(spec_of(Format::fp16, Format::fp16, Format::fp16, true, Rounding::toward_zero), o, x);
    const double up = sum(spec_of(Format::fp16, Format::fp16, Format::fp16, true, Rounding::up), o, x);
    EXPECT_LE(down, exact) << order_name(o);
    EXPECT_GE(up, exact) << order_name(o);
    EXPECT_LT(down, up) << order_name(o);
  }
}

}  // namespace
}  // namespace kvconf
