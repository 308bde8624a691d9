// Unit tests of the oracle's internals: the proven fixed-point exp, dynamic ranges, certification.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_detail.hpp"

namespace {

using kvconf::Format;
namespace ref = kvconf::ref;
namespace det = kvconf::ref::detail;

// |Ẽ − 2^F·2^-y| for one y, measured against a 300-bit MPFR value.
double fixed_exp_error(double yv, int F) {
  ref::Mpfr y(128), tmp(128), t(300);
  mpfr_set_d(y.get(), yv, MPFR_RNDN);
  const std::uint64_t E = det::fixed_exp2_neg(y.get(), F, tmp.get());
  mpfr_neg(t.get(), y.get(), MPFR_RNDN);
  mpfr_exp2(t.get(), t.get(), MPFR_RNDN);
  mpfr_mul_2si(t.get(), t.get(), F, MPFR_RNDN);
  mpfr_sub_ui(t.get(), t.get(), E, MPFR_RNDN);
  return std::fabs(mpfr_get_d(t.get(), MPFR_RNDN));
}

TEST(OracleDetail, FixedPointExpStaysWithinItsProvenBound) {
  std::mt19937_64 g(1);
  std::uniform_real_distribution<double> U(0.0, 1.0);
  double worst = 0;
  for (int F : {62, 50, 40}) {
    for (int t = 0; t < 100000; ++t) {
      const double y = (t % 4 == 0) ? U(g) * 0.05 : U(g) * (F + 3);  // dense near 0, and the full range
      worst = std::max(worst, fixed_exp_error(y, F));
    }
    for (double y : {0.0, 0x1p-60, 1.0, 1.0 - 0x1p-52, 0.5, 0.99609375, static_cast<double>(F + 1),
                     std::nextafter(F + 2.0, 0.0), F + 2.0, 100.0})
      worst = std::max(worst, fixed_exp_error(y, F));
  }
  EXPECT_LE(worst, 1.93);  // the derivation in oracle_common.cpp
  EXPECT_LE(worst, det::kFixedExpEta);
  RecordProperty("fixed_exp_worst_error_units", std::to_string(worst));
  ref::Mpfr y(128), tmp(128);
  mpfr_set_zero(y.get(), 1);
  EXPECT_EQ(det::fixed_exp2_neg(y.get(), 62, tmp.get()), std::uint64_t{1} << 62);  // exp(0) exact
}

TEST(OracleDetail, IntegerLogitScalingStaysWithinItsBound) {
  // ŷ = a·KL by make_yscale/apply_yscale against MPFR: 0 <= y − ŷ <= y·2^-126 + 2^-64.
  std::mt19937_64 g(3);
  for (double kl : {0x1.71547652b82fep-52, 0.0883883476483184 * 1.4426950408889634 * 0x1p-48, 1.0, 3e-30, 0x1p62}) {
    ref::Mpfr KL(192), y(600), yh(600), bound(600);
    mpfr_set_d(KL.get(), kl, MPFR_RNDN);
    const det::YScale ys = det::make_yscale(KL.get());
    for (int t = 0; t < 20000; ++t) {
      const int bits = 1 + static_cast<int>(g() % 126);
      det::u128 a = (static_cast<det::u128>(g()) << 64) | g();
      a >>= (128 - bits);
      std::uint64_t k = 0, f = 0;
      const bool ok = det::apply_yscale(ys, a, 64, &k, &f);
      mpfr_set_ui(y.get(), static_cast<unsigned long>(a >> 64), MPFR_RNDN);
      mpfr_mul_2ui(y.get(), y.get(), 64, MPFR_RNDN);
      mpfr_add_ui(y.get(), y.get(), static_cast<unsigned long>(a), MPFR_RNDN);
      mpfr_mul(y.get(), y.get(), KL.get(), MPFR_RNDN);  // exact at 600 bits
      if (!ok) {
        ASSERT_GE(mpfr_cmp_ui(y.get(), 63), 0) << "rejected a small y";
        continue;
      }
      mpfr_set_ui(yh.get(), f, MPFR_RNDN);
      mpfr_div_2ui(yh.get(), yh.get(), 64, MPFR_RNDN);
      mpfr_add_ui(yh.get(), yh.get(), k, MPFR_RNDN);
      mpfr_sub(yh.get(), y.get(), yh.get(), MPFR_RNDN);  // y − ŷ
      ASSERT_GE(mpfr_sgn(yh.get()), 0);
      mpfr_mul_2si(bound.get(), y.get(), -126, MPFR_RNDN);
      mpfr_add_d(bound.get(), bound.get(), 0x1p-64, MPFR_RNDN);
      ASSERT_LE(mpfr_cmp(yh.get(), bound.get()), 0) << "kl=" << kl;
    }
  }
}

// Whether check_values accepts the single value v as a value of f.
bool accepts(double v, Format f) {
  try {
    det::check_values("t", "x", std::vector<double>{v}, f);
  } catch (const std::invalid_argument&) {
    return false;
  }
  return true;
}

TEST(OracleDetail, FastRepresentabilityCheckAgreesWithNumerics) {
  // check_values' bit test against numerics' representable(), on every fp8/fp16/bf16 value and
  // its double neighbours, and on random doubles.
  std::mt19937_64 g(9);
  std::vector<double> probe;
  for (Format f : {Format::fp8_e4m3, Format::fp8_e5m2, Format::fp16, Format::bf16}) {
    const int bits = kvconf::info(f).bits;
    for (std::uint32_t b = 0; b < (1u << bits); ++b) {
      const double x = kvconf::decode(f, b);
      if (!std::isfinite(x)) continue;
      probe = {x, std::nextafter(x, HUGE_VAL), std::nextafter(x, -HUGE_VAL), x * (1 + 0x1p-12), x * 0.75};
      for (double v : probe) {
        ASSERT_EQ(accepts(v, f), kvconf::representable(f, v)) << kvconf::name(f) << " v=" << v;
      }
    }
  }
  for (int t = 0; t < 20000; ++t) {
    const double v = std::ldexp(static_cast<double>(g() >> 11), static_cast<int>(g() % 400) - 250);
    for (Format f : {Format::fp32, Format::bf16, Format::fp64})
      ASSERT_EQ(accepts(v, f), kvconf::representable(f, v)) << kvconf::name(f) << " v=" << v;
  }
}

TEST(OracleDetail, RangeOf) {
  const double x[] = {0.0, 3.0, -0.375, 0x1p-24};
  const det::Range r = det::range_of(x);
  EXPECT_EQ(r.lo, -24);
  EXPECT_EQ(r.hi, 2);  // |x| < 4
  for (double v : x) EXPECT_EQ(std::ldexp(static_cast<double>(det::to_fixed(v, r.lo)), r.lo), v);
  const double z[] = {0.0, -0.0};
  EXPECT_EQ(det::range_of(z).span(), 0);
  EXPECT_EQ(det::ceil_log2(1), 0);
  EXPECT_EQ(det::ceil_log2(4096), 12);
  EXPECT_EQ(det::ceil_log2(4097), 13);
}

TEST(OracleDetail, CertifyAcceptsOnlyBracketsThatRoundAlike) {
  ref::Mpfr lo(200), hi(200);
  mpfr_set_d(lo.get(), 1.0 + 0x1p-11, MPFR_RNDN);  // fp16 midpoint between 1 and 1 + 2^-10
  mpfr_nextabove(lo.get());
  mpfr_set(hi.get(), lo.get(), MPFR_RNDN);
  mpfr_nextabove(hi.get());
  auto r = det::certify(Format::fp16, {}, lo.get(), hi.get());
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.value, 1.0 + 0x1p-10);
  mpfr_nextbelow(lo.get());
  mpfr_nextbelow(lo.get());  // now the bracket straddles the midpoint
  EXPECT_FALSE(det::certify(Format::fp16, {}, lo.get(), hi.get()).ok);
  // [0, tiny] with a known positive value: certifies to +0 (RN) and to the smallest subnormal (RU).
  mpfr_set_zero(lo.get(), 1);
  mpfr_set_ui_2exp(hi.get(), 1, -2000, MPFR_RNDN);
  EXPECT_FALSE(det::certify(Format::fp16, {kvconf::Rounding::up}, lo.get(), hi.get()).ok);
  r = det::certify(Format::fp16, {kvconf::Rounding::up}, lo.get(), hi.get(), true);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.value, 0x1p-24);
}

TEST(OracleDetail, RoundQuotientIsCorrectlyRounded) {
  ref::Mpfr num(64), q(400);
  for (unsigned long den : {3ul, 7ul, 1000ul, 2048ul}) {
    mpfr_set_ui(num.get(), 1, MPFR_RNDN);
    mpfr_div_ui(q.get(), num.get(), den, MPFR_RNDN);
    for (Format f : {Format::fp16, Format::bf16, Format::fp32, Format::fp64})
      EXPECT_EQ(det::round_quotient(f, {}, num.get(), den), ref::round_mpfr(f, q.get())) << den;
  }
  // 3·(1 + 2^-11)/3: an exact fp16 tie → even
  mpfr_set_d(num.get(), 3.0 * (1.0 + 0x1p-11), MPFR_RNDN);
  EXPECT_EQ(det::round_quotient(Format::fp16, {}, num.get(), 3), 1.0);
}

}  // namespace
