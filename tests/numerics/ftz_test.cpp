// Flush-to-zero (results) and denormals-are-zero (decode) semantics, in every format and rounding mode:
// a result whose rounded magnitude is below the smallest normal becomes the zero of its sign.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>

#include "kvconf/numerics/arith.hpp"
#include "kvconf/numerics/storage.hpp"
#include "kvconf/reference/mpfr_format.hpp"

namespace kvconf {

// Test-name suffixes (CMake's gtest discovery appends the printed parameter): print formats by name.
inline void PrintTo(Format f, std::ostream* os) { *os << name(f); }

namespace {

constexpr Rounding kModes[] = {Rounding::nearest_even, Rounding::toward_zero, Rounding::up, Rounding::down,
                               Rounding::to_odd};
constexpr Format kFormats[] = {Format::fp16, Format::bf16, Format::fp8_e4m3, Format::fp8_e5m2, Format::fp32};

bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

std::string label(Format f, Rounding r) {
  return std::string(name(f)) + " mode " + std::to_string(static_cast<int>(r));
}

class Ftz : public ::testing::TestWithParam<Format> {};

// Every subnormal of the format, as an operation result (x·1, x + 0) and as a conversion: flushed to
// the zero of its sign with FTZ, kept without. Normal values are never touched.
TEST_P(Ftz, SubnormalResultFlushesToSignedZero) {
  const Format f = GetParam();
  const FormatInfo& fi = info(f);
  const std::uint32_t n = fi.bits == 32 ? 0x00800000u : (1u << fi.man_bits);  // subnormal fields: 1 .. n-1
  const std::uint32_t sign = 1u << (fi.bits - 1);
  const std::uint32_t step = fi.bits == 32 ? 4099u : 1u;  // fp32: a stride through its 2^23 subnormals
  for (Rounding r : kModes) {
    const RoundOptions ftz{r, true, false}, plain{r, false, false};
    for (std::uint32_t m = 1; m < n; m += step) {
      for (std::uint32_t s : {0u, sign}) {
        const double x = decode(f, s | m);
        const double zero = std::copysign(0.0, x);
        ASSERT_TRUE(same(mul(f, x, 1.0, ftz), zero)) << label(f, r) << " x=" << x;
        ASSERT_TRUE(same(add(f, x, zero, ftz), zero)) << label(f, r) << " x=" << x;
        ASSERT_TRUE(same(round_to(f, x, ftz), zero)) << label(f, r) << " x=" << x;
        ASSERT_EQ(encode(f, x, ftz), s) << label(f, r) << " x=" << x;
        ASSERT_TRUE(same(mul(f, x, 1.0, plain), x)) << label(f, r) << " x=" << x;
      }
    }
    // The smallest normal, the largest finite and ±0 pass through unchanged.
    for (double x : {fi.min_normal, -fi.min_normal, fi.max_finite, -fi.max_finite, 0.0, -0.0})
      EXPECT_TRUE(same(mul(f, x, 1.0, ftz), x)) << label(f, r) << " x=" << x;
  }
}

// The flush is decided on the rounded result: just below the smallest normal, a mode that rounds up to
// it keeps it, a mode that rounds down to the largest subnormal flushes.
TEST_P(Ftz, DecidedAfterRounding) {
  const Format f = GetParam();
  const FormatInfo& fi = info(f);
  const double x = fi.min_normal - fi.min_subnormal / 2;  // tie: largest subnormal (odd) vs min normal (even)
  EXPECT_EQ(round_to(f, x, {Rounding::nearest_even, true}), fi.min_normal);
  EXPECT_EQ(round_to(f, x, {Rounding::up, true}), fi.min_normal);
  EXPECT_TRUE(same(round_to(f, x, {Rounding::toward_zero, true}), 0.0));
  EXPECT_TRUE(same(round_to(f, x, {Rounding::down, true}), 0.0));
  EXPECT_TRUE(same(round_to(f, -x, {Rounding::down, true}), -fi.min_normal));
  EXPECT_TRUE(same(round_to(f, -x, {Rounding::up, true}), -0.0));
  // A tiny positive value rounded up to the smallest subnormal is still flushed.
  EXPECT_TRUE(same(round_to(f, fi.min_subnormal / 4, {Rounding::up, true}), 0.0));
  EXPECT_EQ(round_to(f, fi.min_subnormal / 4, {Rounding::up, false}), fi.min_subnormal);
  // The MPFR reference agrees on all of these.
  mpfr_t m;
  mpfr_init2(m, 64);
  for (double v : {x, -x, fi.min_subnormal / 4, -fi.min_subnormal / 4})
    for (Rounding r : kModes) {
      mpfr_set_d(m, v, MPFR_RNDN);
      const RoundOptions o{r, true, false};
      EXPECT_TRUE(same(round_to(f, v, o), ref::round_mpfr(f, m, o))) << label(f, r) << " v=" << v;
    }
  mpfr_clear(m);
}

// FTZ does not change overflow, NaN or normal results.
TEST_P(Ftz, IndependentOfOverflowAndNan) {
  const Format f = GetParam();
  const FormatInfo& fi = info(f);
  const RoundOptions ftz{Rounding::nearest_even, true, false}, ftz_sat{Rounding::nearest_even, true, true};
  const double big = fi.max_finite * 2;
  EXPECT_TRUE(same(round_to(f, big, ftz), fi.has_inf() ? HUGE_VAL : std::nan("")));
  EXPECT_TRUE(same(round_to(f, -big, ftz_sat), -fi.max_finite));
  EXPECT_TRUE(std::isnan(round_to(f, std::nan(""), ftz)));
  EXPECT_EQ(round_to(f, 1.0, ftz), 1.0);
}

// DAZ: decode(daz = true) reads every subnormal pattern as the zero of its sign; other patterns are
// unchanged. Storage types decode without DAZ.
TEST_P(Ftz, DazDecoding) {
  const Format f = GetParam();
  const FormatInfo& fi = info(f);
  const std::uint32_t sign = 1u << (fi.bits - 1);
  const std::uint64_t count = fi.bits == 32 ? (std::uint64_t{1} << 32) : (std::uint64_t{1} << fi.bits);
  const std::uint64_t step = fi.bits == 32 ? 65537 : 1;
  for (std::uint64_t k = 0; k < count; k += step) {
    const auto b = static_cast<std::uint32_t>(k);
    const double plain = decode(f, b), daz = decode(f, b, /*daz=*/true);
    const bool sub = std::isfinite(plain) && plain != 0.0 && std::fabs(plain) < fi.min_normal;
    if (sub) {
      ASSERT_TRUE(same(daz, (b & sign) ? -0.0 : 0.0)) << name(f) << " pattern " << b;
    } else {
      ASSERT_TRUE(same(daz, plain)) << name(f) << " pattern " << b;
    }
  }
  EXPECT_TRUE(same(decode(f, sign | 1u, true), -0.0));
  EXPECT_EQ(decode(f, 1u), fi.min_subnormal);
}

INSTANTIATE_TEST_SUITE_P(Formats, Ftz, ::testing::ValuesIn(kFormats),
                         [](const auto& p) { return std::string(name(p.param)); });

// The fast-math pipeline (DAZ on inputs, FTZ on results) differs from IEEE exactly on subnormals.
TEST(FtzDaz, FastMathPipelineDiffersOnSubnormals) {
  const Fp16 tiny = Fp16::from_bits(0x0001);      // 2^-24
  EXPECT_EQ(tiny.value(), std::ldexp(1.0, -24));  // storage types decode without DAZ
  const double ieee = mul(Format::fp16, decode(Format::fp16, tiny.bits), 1024.0);
  const double fast = mul(Format::fp16, decode(Format::fp16, tiny.bits, true), 1024.0, {Rounding::nearest_even, true});
  EXPECT_EQ(ieee, std::ldexp(1.0, -14));  // a normal result from a subnormal input
  EXPECT_TRUE(same(fast, 0.0));
  // FTZ alone keeps the normal result of a subnormal input.
  EXPECT_EQ(mul(Format::fp16, decode(Format::fp16, tiny.bits), 1024.0, {Rounding::nearest_even, true}),
            std::ldexp(1.0, -14));
  // fma with a flushed subnormal result keeps the sign of the exact result.
  EXPECT_TRUE(same(fma(Format::fp16, -std::ldexp(1.0, -14), 0.5, 0.0, {Rounding::nearest_even, true}), -0.0));
}

}  // namespace
}  // namespace kvconf
