// Unit tests of the tensor-core block-FMA model (numerics/tensor_core.hpp): hand-constructed cases for
// each feature of the model (exact products, alignment exponent, truncation, RZ/RNE, c in the alignment,
// chaining) and a randomized cross-check against an independent step-by-step re-implementation of the
// procedure of Generic_BFMA_TC.m / fpbits_IEEE2 (north-numerical-computing/MATLAB-tensor-core), which
// the library replaces by a closed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/numerics/tensor_core.hpp"

namespace kvconf {
namespace {

double p2(int e) { return std::ldexp(1.0, e); }

const TensorCoreParams kV100 = TensorCoreParams::v100();
const TensorCoreParams kA100 = TensorCoreParams::a100();
const TensorCoreParams kH100 = TensorCoreParams::h100();

double block(const TensorCoreParams& p, std::vector<double> a, std::vector<double> b, double c = 0.0,
             Format in = Format::fp16, Format acc = Format::fp32) {
  return tensor_core_block_fma(p, in, acc, a, b, c);
}

// Small integers: every product and partial sum is an integer below 2^24, so nothing is truncated
// or rounded in any configuration.
TEST(TensorCoreModel, IntegerInputsAreExact) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> d(-32, 32);
  for (const auto& p : {kV100, kA100, kH100}) {
    for (std::size_t n : {1u, 5u, 16u, 33u, 1024u}) {
      std::vector<double> a(n), b(n);
      double exact = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = d(rng);
        b[i] = d(rng);
        exact += a[i] * b[i];
      }
      EXPECT_EQ(tensor_core_dot(p, Format::fp16, Format::fp32, a, b), exact) << "k=" << p.k << " n=" << n;
      EXPECT_EQ(tensor_core_dot(p, Format::bf16, Format::fp32, a, b), exact) << "k=" << p.k << " n=" << n;
    }
  }
}

// Truncation bias: one product 1 and three products 1.5·2^-24. V100 (neab = 0) truncates to multiples of
// 2^-23 and drops each small product entirely (exact 1 + 4.5·2^-24 → 1); H100 (neab = 2, quantum 2^-25)
// keeps them, and RZ cuts 1 + 2.25·2^-23 to 1 + 2^-22. Sequential fp32 FMA rounds to nearest: 1 + 3·2^-23.
TEST(TensorCoreModel, TruncationDropsAKnownAmountAndRoundsTowardZero) {
  const std::vector<double> a{1.0, 1.5 * p2(-12), 1.5 * p2(-12), 1.5 * p2(-12)};
  const std::vector<double> b{1.0, p2(-12), p2(-12), p2(-12)};
  EXPECT_EQ(block(kV100, a, b), 1.0);
  EXPECT_EQ(block(kA100, a, b), 1.0 + p2(-23));  // neab = 1: quantum 2^-24, each → 2^-24; RZ(1 + 1.5·2^-23)
  EXPECT_EQ(block(kH100, a, b), 1.0 + p2(-22));
  AccumSpec s;
  s.in = Format::fp16;
  s.acc = s.out = Format::fp32;
  EXPECT_EQ(dot(s, Sequential{}, a, b), 1.0 + 3 * p2(-23));
  // Toward zero for negative sums too.
  std::vector<double> na = a;
  for (auto& v : na) v = -v;
  EXPECT_EQ(block(kV100, na, b), -1.0);
  EXPECT_EQ(block(kH100, na, b), -1.0 - p2(-22));
}

// The final rounding: exact block sum 1 + 0.75·2^-23 (kept whole by H100's quantum 2^-25) is cut to 1
// under RZ (fp32 output), rounded to 1 + 2^-23 under RNE, and to 1 in fp16 (RNE).
TEST(TensorCoreModel, FinalRoundingIsRzForFp32AndRneForFp16) {
  const std::vector<double> a{1.0, 1.5 * p2(-12)}, b{1.0, p2(-12)};
  EXPECT_EQ(block(kH100, a, b), 1.0);
  TensorCoreParams rne = kH100;
  rne.rounding = Rounding::nearest_even;
  EXPECT_EQ(block(rne, a, b), 1.0 + p2(-23));
  EXPECT_EQ(tensor_core_rounding(kH100, Format::fp32), Rounding::toward_zero);
  EXPECT_EQ(tensor_core_rounding(kH100, Format::fp16), Rounding::nearest_even);
  // fp16 output: 1 + 2^-11 + 2^-13 is above the tie → 1 + 2^-10; 1 + 2^-11 alone is a tie → 1.
  EXPECT_EQ(block(kH100, {1.0, p2(-6), p2(-7)}, {1.0, p2(-5), p2(-6)}, 0.0, Format::fp16, Format::fp16), 1.0 + p2(-10));
  EXPECT_EQ(block(kH100, {1.0, p2(-6)}, {1.0, p2(-5)}, 0.0, Format::fp16, Format::fp16), 1.0);
}

// The alignment exponent of a product is e(a) + e(b) with subnormal exponents clamped at emin, not the
// exponent of the computed product: 2^-24 (subnormal, e = −14) × 2^10 has e(a)+e(b) = −4 though the
// product is 2^-14, so V100 truncates to multiples of 2^-27 and 1.5·2^-28 is lost.
TEST(TensorCoreModel, AlignmentUsesOperandExponentsWithSubnormalsClamped) {
  EXPECT_EQ(block(kV100, {p2(-24), 1.5 * p2(-14)}, {p2(10), p2(-14)}), p2(-14));
  // With normal operands of the same product the alignment is at −14 and nothing is lost.
  EXPECT_EQ(block(kV100, {p2(-7), 1.5 * p2(-14)}, {p2(-7), p2(-14)}), p2(-14) + 1.5 * p2(-28));
}

// A significand product in [2, 4) does not move the quantum: 1.5·1.5 = 2.25 (e(a)+e(b) = 0) with two
// products 2^-23 — both kept by V100 (quantum 2^-23), the sum 2.25 + 2^-22 is an fp32 number.
TEST(TensorCoreModel, SignificandProductAboveTwoKeepsItsBit) {
  EXPECT_EQ(block(kV100, {1.5, p2(-12), p2(-12)}, {1.5, p2(-11), p2(-11)}), 2.25 + p2(-22));
}

// c takes part in the alignment: block 2 sees c = 1024 (from block 1) and three products 0.75·2^-13; the
// quantum is 2^(10−23) = 2^-13 so all three vanish (1024). Adding c after an exact product sum would
// give 1024 + 2·2^-13 (RZ of 1024 + 2.25·2^-13).
TEST(TensorCoreModel, AccumulatorTakesPartInAlignmentAcrossChainedBlocks) {
  const double s = 1.5 * p2(-7);
  const std::vector<double> a{32, 0, 0, 0, s, s, s, 0};
  const std::vector<double> b{32, 0, 0, 0, p2(-7), p2(-7), p2(-7), 0};
  EXPECT_EQ(tensor_core_dot(kV100, Format::fp16, Format::fp32, a, b), 1024.0);
  const double c1 = block(kV100, {32, 0, 0, 0}, {32, 0, 0, 0});
  EXPECT_EQ(c1, 1024.0);
  EXPECT_EQ(block(kV100, {s, s, s, 0}, {p2(-7), p2(-7), p2(-7), 0}, c1), 1024.0);
  EXPECT_EQ(block(kV100, {s, s, s}, {p2(-7), p2(-7), p2(-7)}), 2.25 * p2(-13));
}

TEST(TensorCoreModel, ChainingEqualsExplicitBlockCallsAndZeroPadding) {
  std::mt19937_64 rng(9);
  std::normal_distribution<double> g(0.0, 1.0);
  for (const auto& p : {kV100, kA100, kH100}) {
    for (Format acc : {Format::fp32, Format::fp16}) {
      const std::size_t n = 3 * p.k + 5;
      std::vector<double> a(n), b(n);
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = round_to(Format::fp16, g(rng));
        b[i] = round_to(Format::fp16, g(rng));
      }
      double c = 0.0;
      for (std::size_t lo = 0; lo < n; lo += p.k) {
        const std::size_t len = std::min<std::size_t>(p.k, n - lo);
        c = tensor_core_block_fma(p, Format::fp16, acc, std::span(a).subspan(lo, len), std::span(b).subspan(lo, len),
                                  c);
      }
      EXPECT_EQ(tensor_core_dot(p, Format::fp16, acc, a, b), c);
      std::vector<double> ap = a, bp = b;
      const std::size_t padded = (n + p.k - 1) / p.k * p.k;
      ASSERT_GT(padded, n);
      ap.resize(padded, 0.0);
      bp.resize(padded, 0.0);
      EXPECT_EQ(tensor_core_dot(p, Format::fp16, acc, ap, bp), c);
      // A non-zero starting c.
      EXPECT_EQ(tensor_core_dot(p, Format::fp16, acc, std::span(a).subspan(p.k), std::span(b).subspan(p.k),
                                tensor_core_block_fma(p, Format::fp16, acc, std::span(a).subspan(0, p.k),
                                                      std::span(b).subspan(0, p.k), 0.0)),
                c);
    }
  }
}

TEST(TensorCoreModel, SpecialValuesAndOverflow) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(block(kH100, {inf, 1.0}, {0.0, 1.0})));
  EXPECT_TRUE(std::isnan(block(kH100, {inf, -inf}, {1.0, 1.0})));
  EXPECT_EQ(block(kH100, {inf, 1.0}, {1.0, 1.0}), inf);
  EXPECT_TRUE(std::isnan(block(kH100, {1.0}, {1.0}, std::numeric_limits<double>::quiet_NaN())));
  // A sum reaching 2^128 is Inf in the model even under RZ (IEEE RZ would saturate).
  EXPECT_EQ(block(kH100, {p2(64)}, {p2(64)}, 0.0, Format::bf16), inf);
  EXPECT_EQ(block(kH100, {-p2(64)}, {p2(64)}, 0.0, Format::bf16), -inf);
  // fp16 output rounds to nearest: 256·256 = 65536 overflows.
  EXPECT_EQ(block(kH100, {256.0}, {256.0}, 0.0, Format::fp16, Format::fp16), inf);
  // Exact cancellation gives +0.
  const double z = block(kH100, {1.0, -1.0}, {1.0, 1.0});
  EXPECT_EQ(z, 0.0);
  EXPECT_FALSE(std::signbit(z));
}

TEST(TensorCoreModel, Validation) {
  const std::vector<double> one{1.0};
  EXPECT_THROW(tensor_core_block_fma({0, 0, {}}, Format::fp16, Format::fp32, one, one, 0.0), std::invalid_argument);
  EXPECT_THROW(tensor_core_block_fma({4, -1, {}}, Format::fp16, Format::fp32, one, one, 0.0), std::invalid_argument);
  EXPECT_THROW(tensor_core_block_fma(kH100, Format::fp32, Format::fp32, one, one, 0.0), std::invalid_argument);
  EXPECT_THROW(tensor_core_block_fma(kH100, Format::fp16, Format::bf16, one, one, 0.0), std::invalid_argument);
  EXPECT_THROW(tensor_core_block_fma(kV100, Format::fp16, Format::fp32, std::vector<double>(5, 1.0),
                                     std::vector<double>(5, 1.0), 0.0),
               std::invalid_argument);
  EXPECT_THROW(tensor_core_block_fma(kH100, Format::fp16, Format::fp32, one, std::vector<double>{1.0, 2.0}, 0.0),
               std::invalid_argument);
  EXPECT_THROW(tensor_core_block_fma(kH100, Format::fp16, Format::fp16, one, one, 1.0 + p2(-20)),
               std::invalid_argument);
  EXPECT_THROW(tensor_core_dot(kH100, Format::fp16, Format::fp32, std::vector<double>{1.0 + p2(-20)}, one),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------
// Independent re-implementation of the model's procedure, step by step as Generic_BFMA_TC.m and its
// fpbits_IEEE2 describe it (significands scaled to 23 fraction bits, normalisation of products >= 2 by
// a right shift, the extra alignment bit, per-term shifts), written for this test from the description
// in tensor_core.cpp's header. The library uses the closed-form quantum instead; they must agree bitwise.
double procedural_block(const TensorCoreParams& p, Format in, Format acc, const std::vector<double>& a,
                        const std::vector<double>& b, double c) {
  const int emin_in = info(in).emin;
  struct P {
    bool neg;
    std::int64_t sig;  // |significand| · 2^23 (integer)
    int exp;
    double sig_real;
  };
  std::vector<P> prods;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == 0.0 || b[i] == 0.0) continue;
    const int ea = std::max(static_cast<int>(std::floor(std::log2(std::fabs(a[i])))), emin_in);
    const int eb = std::max(static_cast<int>(std::floor(std::log2(std::fabs(b[i])))), emin_in);
    const double sa = std::ldexp(a[i], -ea), sb = std::ldexp(b[i], -eb);
    const double sp = std::fabs(sa * sb);  // in [0, 4), exact
    prods.push_back({(sa < 0) != (sb < 0), static_cast<std::int64_t>(std::ldexp(sp, 23)), ea + eb, sp});
  }
  if (prods.empty() && c == 0.0) return 0.0;
  int max_prod_exp = std::numeric_limits<int>::min();
  for (const auto& q : prods) max_prod_exp = std::max(max_prod_exp, q.exp);
  double max_product = 0.0;
  for (const auto& q : prods)
    if (q.exp == max_prod_exp) max_product = std::max(max_product, q.sig_real);
  bool extra = !prods.empty();
  int expC = 0;
  std::int64_t sigC = 0;
  if (c != 0.0) {
    expC = std::max(static_cast<int>(std::floor(std::log2(std::fabs(c)))), -126);
    sigC = static_cast<std::int64_t>(std::ldexp(std::fabs(c), 23 - expC));
    extra = extra && max_prod_exp >= expC;
  }
  extra = extra && max_product >= 2.0;
  for (auto& q : prods)
    if (q.sig_real >= 2.0) {
      q.sig >>= 1;
      q.exp += 1;
    }
  const int neab = p.neab + (extra ? 1 : 0);
  int max_exp = std::numeric_limits<int>::min();
  for (const auto& q : prods) max_exp = std::max(max_exp, q.exp);
  if (c != 0.0) max_exp = std::max(max_exp, expC);
  std::int64_t sum = 0;
  const auto aligned = [&](std::int64_t sig, int exp) {
    const int shift = max_exp - exp;
    const std::int64_t s = sig << neab;
    return shift > 62 ? std::int64_t{0} : (s >> shift);
  };
  for (const auto& q : prods) sum += q.neg ? -aligned(q.sig, q.exp) : aligned(q.sig, q.exp);
  if (c != 0.0) sum += (c < 0) ? -aligned(sigC, expC) : aligned(sigC, expC);
  if (sum == 0) return 0.0;
  const double value = std::ldexp(static_cast<double>(sum), max_exp - 23 - neab);  // exact: |sum| < 2^40
  if (std::floor(std::log2(std::fabs(value))) >= info(acc).emax + 1) return value < 0 ? -HUGE_VAL : HUGE_VAL;
  RoundOptions ro;
  ro.mode = tensor_core_rounding(p, acc);
  return round_to(acc, value, ro);
}

TEST(TensorCoreModel, MatchesStepByStepProcedureOnRandomBlocks) {
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_int_distribution<int> expo(-30, 12);
  std::uniform_int_distribution<int> pick(0, 9);
  long checked = 0;
  for (int trial = 0; trial < 30000; ++trial) {
    const TensorCoreParams& p = (trial % 3 == 0) ? kV100 : (trial % 3 == 1) ? kA100 : kH100;
    const Format in = (trial % 2 == 0) ? Format::fp16 : Format::bf16;
    const Format acc = (trial % 5 == 0) ? Format::fp16 : Format::fp32;
    std::vector<double> a(p.k), b(p.k);
    for (int i = 0; i < p.k; ++i) {
      const int sel = pick(rng);
      // Mix: zeros, subnormals, wide exponents, values whose significand products exceed 2.
      a[i] = sel == 0 ? 0.0 : round_to(in, std::ldexp(g(rng), expo(rng) / (in == Format::fp16 ? 2 : 1)));
      b[i] = sel == 1 ? round_to(in, std::ldexp(g(rng), in == Format::fp16 ? -20 : -128))
                      : round_to(in, std::ldexp(g(rng), expo(rng) / 3));
    }
    double c = 0.0;
    if (trial % 4 != 0) c = round_to(acc, std::ldexp(g(rng), expo(rng) / (acc == Format::fp16 ? 3 : 1)));
    if (!std::isfinite(c)) c = 0.0;
    const double want = procedural_block(p, in, acc, a, b, c);
    const double got = tensor_core_block_fma(p, in, acc, a, b, c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(got, want) << "trial " << trial << " k=" << p.k << " neab=" << p.neab << " in=" << name(in)
                           << " acc=" << name(acc);
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << "trial " << trial;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 30000);
}

}  // namespace
}  // namespace kvconf
