// Smoke tests of round_to/encode/decode on hand-checked values (exhaustive sweeps are elsewhere).
#include <gtest/gtest.h>

#include <cmath>

#include "kvconf/numerics/arith.hpp"
#include "kvconf/numerics/storage.hpp"
#include "kvconf/reference/mpfr_format.hpp"

namespace kvconf {
namespace {

TEST(FormatInfoTable, KnownParameters) {
  EXPECT_EQ(info(Format::fp16).max_finite, 65504.0);
  EXPECT_EQ(info(Format::fp8_e4m3).max_finite, 448.0);
  EXPECT_EQ(info(Format::fp8_e5m2).max_finite, 57344.0);
  EXPECT_EQ(info(Format::bf16).min_subnormal, std::ldexp(1.0, -133));
  EXPECT_EQ(info(Format::fp16).min_subnormal, std::ldexp(1.0, -24));
}

TEST(RoundTo, Fp16HandValues) {
  EXPECT_EQ(round_to(Format::fp16, 1.0 + std::ldexp(1.0, -11)), 1.0);                            // tie to even
  EXPECT_EQ(round_to(Format::fp16, 1.0 + 3 * std::ldexp(1.0, -11)), 1.0 + std::ldexp(1.0, -9));  // tie to even (up)
  EXPECT_EQ(round_to(Format::fp16, 65520.0), HUGE_VAL);  // overflow at max + half ulp
  EXPECT_EQ(round_to(Format::fp16, 65519.0), 65504.0);
  EXPECT_EQ(encode(Format::fp16, 1.0), 0x3C00u);
  EXPECT_EQ(Fp16::from(-2.0).bits, 0xC000u);
  EXPECT_EQ(Fp16::from_bits(0x0001).value(), std::ldexp(1.0, -24));
}

TEST(Fma, KnownDoubleRoundingCounterexamples) {
  // notes/numerics.md §4.3: fp16 via fmaf and bf16 via double fma round wrongly on these.
  EXPECT_EQ(fma(Format::fp16, 3.0, 683.0 / 1024.0, std::ldexp(1.0, -24)), 2.001953125);
  EXPECT_EQ(fma(Format::bf16, 1.75, 0.578125, -std::ldexp(1.0, -100)), 1.0078125);
  EXPECT_EQ(ref::op_mpfr(Format::bf16, ref::Op::fma, 1.75, 0.578125, -std::ldexp(1.0, -100)), 1.0078125);
}

TEST(Fma, RejectsWhatItCannotRoundCorrectly) {
  // fp64 fma is native nearest-even only; other modes must not be silently ignored.
  EXPECT_EQ(fma(Format::fp64, 0.1, 0.2, 0.3), std::fma(0.1, 0.2, 0.3));
  EXPECT_THROW(fma(Format::fp64, 0.1, 0.2, 0.3, {Rounding::toward_zero}), std::invalid_argument);
  // Operands wider than 26 bits make a·b inexact in double: refused, not rounded twice.
  EXPECT_THROW(fma(Format::fp32, 0.1, 0.2, 0.0), std::invalid_argument);
}

}  // namespace
}  // namespace kvconf
