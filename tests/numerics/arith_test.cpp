// Arithmetic tests: kvconf add/sub/mul/div/sqrt/fma in fp16, bf16, fp8 (E4M3, E5M2) and fp32, every
// rounding mode, checked bit for bit against MPFR (ref::op_mpfr); targeted hard cases; and proof that the
// checks reject the double-rounded FMA routes of notes/numerics.md §4.3.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <ostream>
#include <string>
#include <vector>

#include "kvconf/numerics/arith.hpp"
#include "kvconf/reference/mpfr_format.hpp"
#include "test_support.hpp"

namespace kvconf {

// Test-name suffixes (CMake's gtest discovery appends the printed parameter): print formats by name.
inline void PrintTo(Format f, std::ostream* os) { *os << name(f); }

namespace {

using namespace kvconf::test;

using ref::Op;

constexpr Rounding kModes[] = {Rounding::nearest_even, Rounding::toward_zero, Rounding::up, Rounding::down,
                               Rounding::to_odd};
constexpr Op kOps[] = {Op::add, Op::sub, Op::mul, Op::div, Op::sqrt, Op::fma};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = HUGE_VAL;

const char* op_name(Op op) {
  switch (op) {
    case Op::add:
      return "add";
    case Op::sub:
      return "sub";
    case Op::mul:
      return "mul";
    case Op::div:
      return "div";
    case Op::sqrt:
      return "sqrt";
    case Op::fma:
      return "fma";
  }
  return "?";
}

// An implementation under test: kvconf's, or one of the naive routes.
using Impl = double (*)(Format, Op, double, double, double, RoundOptions);

double kvconf_impl(Format f, Op op, double a, double b, double c, RoundOptions o) {
  switch (op) {
    case Op::add:
      return kvconf::add(f, a, b, o);
    case Op::sub:
      return kvconf::sub(f, a, b, o);
    case Op::mul:
      return kvconf::mul(f, a, b, o);
    case Op::div:
      return kvconf::div(f, a, b, o);
    case Op::sqrt:
      return kvconf::sqrt(f, a, o);
    case Op::fma:
      return kvconf::fma(f, a, b, c, o);
  }
  return kNaN;
}

// notes/numerics.md §4.3: fp16 FMA through a binary32 fmaf, then one more rounding (double rounding).
double naive_fmaf_route(Format f, Op op, double a, double b, double c, RoundOptions o) {
  if (op != Op::fma) return kvconf_impl(f, op, a, b, c, o);
  const float r = std::fmaf(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c));
  return round_to(f, static_cast<double>(r), o);
}

// The same through a binary64 fma: right for fp16 in RNE, wrong for bf16.
double naive_double_fma_route(Format f, Op op, double a, double b, double c, RoundOptions o) {
  if (op != Op::fma) return kvconf_impl(f, op, a, b, c, o);
  return round_to(f, std::fma(a, b, c), o);
}

void check(Impl impl, Format f, Op op, double a, double b, double c, RoundOptions o, Failures& fails) {
  const double want = ref::op_mpfr(f, op, a, b, c, o);
  const double got = impl(f, op, a, b, c, o);
  ++fails.checked;
  if (!same(got, want)) {
    std::string args = hex(a);
    if (op != Op::sqrt) args += ", " + hex(b);
    if (op == Op::fma) args += ", " + hex(c);
    fails.add(std::string(name(f)) + " " + op_name(op) + "(" + args + ") " + opts_str(o) + ": got " + hex(got) +
              ", mpfr " + hex(want));
  }
}

// ---------- operand generation on bit patterns ----------

struct Gen {
  Format f;
  const FormatInfo& fi;
  std::mt19937_64& rng;

  Gen(Format fmt, std::mt19937_64& r) : f(fmt), fi(info(fmt)), rng(r) {}

  std::uint32_t mask() const { return fi.bits == 32 ? 0xFFFFFFFFu : (1u << fi.bits) - 1; }
  std::uint32_t sign_bit() const { return 1u << (fi.bits - 1); }
  std::uint32_t man_mask() const { return (1u << fi.man_bits) - 1; }
  int top_field() const { return fi.has_inf() ? (1 << fi.exp_bits) - 2 : (1 << fi.exp_bits) - 1; }
  int field_of(std::uint32_t b) const { return static_cast<int>((b >> fi.man_bits) & ((1u << fi.exp_bits) - 1)); }
  bool neg(std::uint32_t b) const { return (b & sign_bit()) != 0; }
  int range(int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); }
  bool coin(int one_in = 2) { return rng() % static_cast<std::uint64_t>(one_in) == 0; }

  std::uint32_t uniform() { return static_cast<std::uint32_t>(rng()) & mask(); }
  std::uint32_t make(bool negative, int field, std::uint32_t man) const {
    field = std::clamp(field, 0, top_field());
    return (negative ? sign_bit() : 0u) | (static_cast<std::uint32_t>(field) << fi.man_bits) | (man & man_mask());
  }
  // A finite value near 2^E with a random significand (subnormal below emin, clamped to the range).
  std::uint32_t with_exponent(bool negative, int E) {
    const std::uint32_t m = static_cast<std::uint32_t>(rng());
    if (E >= fi.emin) return make(negative, E + fi.bias, m);
    const int lead = E - (fi.emin - fi.man_bits);  // position of the leading bit in the subnormal field
    if (lead < 0) return make(negative, 0, 1);
    return make(negative, 0, (1u << lead) | (m & ((1u << lead) - 1)));
  }
  // Keep only the top k fraction bits (products of such numbers hit midpoints exactly).
  std::uint32_t few_bits(std::uint32_t b) {
    const int k = range(0, std::min(fi.man_bits, 6));
    return b & ~((1u << (fi.man_bits - k)) - 1);
  }
  // Move the magnitude by k patterns (k ulps), staying on the same sign.
  std::uint32_t nudge(std::uint32_t b, int k) const {
    const std::int64_t mag = static_cast<std::int64_t>(b & ~sign_bit() & mask()) + k;
    const std::int64_t top = static_cast<std::int64_t>(make(false, top_field(), man_mask()));
    return (b & sign_bit()) | static_cast<std::uint32_t>(std::clamp<std::int64_t>(mag, 0, top));
  }
  double val(std::uint32_t b) const { return decode(f, b); }
  // The pattern nearest to x (saturating, so finite when x is).
  std::uint32_t nearest(double x) const { return encode(f, x, RoundOptions{Rounding::nearest_even, false, true}); }
};

struct Triple {
  double a, b, c;
};

// One operand triple for op: uniform bit patterns, or one of the hard-case families (close exponents
// and cancellation, few-bit significands with a tiny addend, results near underflow or overflow).
Triple draw(Gen& g, Op op) {
  std::uint32_t A = g.uniform(), B = g.uniform(), C = g.uniform();
  const int emin = g.fi.emin, emax = g.fi.emax, p = g.fi.p;
  switch (g.rng() % 8) {
    case 0:
    case 1:
    case 2:
      break;   // uniform patterns: specials, subnormals, everything
    case 3: {  // close exponents: cancellation in add/sub, quotients near 1, fma c near -a·b
      const int fa = g.field_of(A);
      const bool opposite = (op == Op::add) ? !g.coin(4) : g.coin(4);
      B = g.make(opposite ? !g.neg(A) : g.neg(A), fa + g.range(-2, 2), static_cast<std::uint32_t>(g.rng()));
      if (op == Op::sqrt) A = g.nearest(g.val(g.uniform() & ~g.sign_bit()) * g.val(g.uniform() & ~g.sign_bit()));
      if (op == Op::fma) {
        const double prod = g.val(A) * g.val(B);
        if (std::isfinite(prod)) C = g.nudge(g.nearest(-prod), g.range(-3, 3));
        if (g.coin()) C = g.make(g.coin(), g.field_of(C) + g.range(-p - 2, 0), static_cast<std::uint32_t>(g.rng()));
      }
      break;
    }
    case 4: {  // few significant bits (exact midpoints), a tiny c for fma
      A = g.few_bits(A);
      B = g.few_bits(B);
      if (op == Op::fma)
        C = g.make(g.coin(), g.range(0, 3), static_cast<std::uint32_t>(g.rng()));
      else if (op == Op::add || op == Op::sub)
        B = g.make(g.coin(), g.field_of(A) - g.range(p - 1, p + 2), g.few_bits(g.uniform()));
      break;
    }
    case 5: {  // results near the bottom of the range (subnormal results, gradual underflow)
      const int Et = g.range(emin - p - 1, emin + 1);
      const int Ea = g.range(emin, emax);
      switch (op) {
        case Op::mul:
        case Op::fma:
          A = g.with_exponent(g.coin(), Ea);
          B = g.with_exponent(g.coin(), Et - Ea);
          C = g.with_exponent(g.coin(), g.range(emin - p, emin + 1));
          break;
        case Op::div:
          A = g.with_exponent(g.coin(), Ea);
          B = g.with_exponent(g.coin(), Ea - Et);
          break;
        default:
          A = g.with_exponent(g.coin(), g.range(emin - p + 1, emin + 1));
          B = g.with_exponent(g.coin(), g.range(emin - p + 1, emin + 1));
          if (op == Op::sqrt) A &= ~g.sign_bit();
      }
      break;
    }
    case 6: {  // results near the top of the range (overflow, saturation)
      const int Et = g.range(emax - 1, emax + 1);
      const int Ea = g.range(std::max(emin, Et - emax), emax);
      switch (op) {
        case Op::mul:
        case Op::fma:
          A = g.with_exponent(g.coin(), Ea);
          B = g.with_exponent(g.coin(), Et - Ea);
          C = g.with_exponent(g.coin(), g.range(emax - 2, emax));
          break;
        case Op::div:
          A = g.with_exponent(g.coin(), g.range(Et + emin, emax));
          B = g.with_exponent(g.coin(), g.field_of(A) - g.fi.bias - Et);
          break;
        default: {
          const bool s = g.coin();
          A = g.with_exponent(s, g.range(emax - 1, emax));
          B = g.with_exponent(op == Op::sub ? !s : s, g.range(emax - 2, emax));
          if (op == Op::sqrt) A &= ~g.sign_bit();
        }
      }
      break;
    }
    case 7: {  // (near-)exact cancellation, and sqrt of (near-)squares
      if (op == Op::add) B = g.nudge(A ^ g.sign_bit(), g.range(-2, 2));
      if (op == Op::sub || op == Op::div) B = g.nudge(A, g.range(-2, 2));
      if (op == Op::fma) {
        const double prod = g.val(A) * g.val(B);
        if (std::isfinite(prod)) C = g.nudge(g.nearest(-prod), g.range(-2, 2));
      }
      if (op == Op::sqrt) {
        const double s = g.val(g.uniform() & ~g.sign_bit());
        A = g.nudge(g.nearest(s * s), g.range(-1, 1));
      }
      break;
    }
  }
  const double a = g.val(A);
  if (op == Op::sqrt) return {a, 0.0, 0.0};
  return {a, g.val(B), op == Op::fma ? g.val(C) : 0.0};
}

// n random triples in one rounding mode; with `flags`, FTZ and saturate each switched on for 1 in 4.
void random_sweep(Impl impl, Format f, Op op, Rounding mode, long n, bool flags, std::mt19937_64& rng,
                  Failures& fails) {
  Gen g(f, rng);
  for (long i = 0; i < n; ++i) {
    const Triple t = draw(g, op);
    RoundOptions o{mode};
    if (flags) {
      const std::uint64_t r = rng();
      o.ftz = (r & 3) == 0;
      o.saturate = ((r >> 2) & 3) == 0;
    }
    check(impl, f, op, t.a, t.b, t.c, o, fails);
  }
}

// ======================= random operands vs MPFR =======================

struct OpParam {
  Format f;
  Op op;
};
void PrintTo(const OpParam& p, std::ostream* os) { *os << name(p.f) << " " << op_name(p.op); }

std::vector<OpParam> all_op_params() {
  std::vector<OpParam> v;
  for (Format f : {Format::fp16, Format::bf16, Format::fp8_e4m3, Format::fp8_e5m2, Format::fp32})
    for (Op op : kOps) v.push_back({f, op});
  return v;
}

std::string op_param_name(const ::testing::TestParamInfo<OpParam>& p) {
  return std::string(name(p.param.f)) + "_" + op_name(p.param.op);
}

class ArithRandom : public ::testing::TestWithParam<OpParam> {
 protected:
  void run(long n_rne, long n_other) {
    const auto [f, op] = GetParam();
    Failures fails;
    fails.set_seed(test_seed());
    std::mt19937_64 rng(fails.seed);
    random_sweep(kvconf_impl, f, op, Rounding::nearest_even, n_rne, /*flags=*/true, rng, fails);
    for (Rounding mode : kModes)
      if (mode != Rounding::nearest_even) random_sweep(kvconf_impl, f, op, mode, n_other, true, rng, fails);
    fails.expect_none(std::string(name(f)) + " " + op_name(op));
  }
};

// Default run: 10^5 triples in RNE and 2·10^4 in each other mode per (op, format).
TEST_P(ArithRandom, MatchesMpfr) { run(100000, 20000); }

// 10^7 triples in RNE and 10^6 in each other mode per (op, format).
TEST_P(ArithRandom, SlowMatchesMpfr10M) { run(10000000, 1000000); }

INSTANTIATE_TEST_SUITE_P(Formats, ArithRandom, ::testing::ValuesIn(all_op_params()), op_param_name);

// ======================= FP8: all operands =======================

std::vector<OpParam> fp8_binary_params() {
  std::vector<OpParam> v;
  for (Format f : {Format::fp8_e4m3, Format::fp8_e5m2})
    for (Op op : {Op::add, Op::sub, Op::mul, Op::div}) v.push_back({f, op});
  return v;
}

class Fp8AllPairs : public ::testing::TestWithParam<OpParam> {};

// All 65536 operand pairs, every mode, FTZ and saturate on/off.
TEST_P(Fp8AllPairs, MatchesMpfr) {
  const auto [f, op] = GetParam();
  Failures fails;
  for (std::uint32_t A = 0; A < 256; ++A)
    for (std::uint32_t B = 0; B < 256; ++B)
      for (Rounding mode : kModes)
        for (bool ftz : {false, true})
          for (bool sat : {false, true})
            check(kvconf_impl, f, op, decode(f, A), decode(f, B), 0.0, RoundOptions{mode, ftz, sat}, fails);
  fails.expect_none(std::string(name(f)) + " " + op_name(op) + " all pairs");
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8AllPairs, ::testing::ValuesIn(fp8_binary_params()), op_param_name);

class Fp8All : public ::testing::TestWithParam<Format> {};

TEST_P(Fp8All, SqrtAllPatterns) {
  const Format f = GetParam();
  Failures fails;
  for (std::uint32_t A = 0; A < 256; ++A)
    for (Rounding mode : kModes)
      for (bool ftz : {false, true})
        for (bool sat : {false, true})
          check(kvconf_impl, f, Op::sqrt, decode(f, A), 0.0, 0.0, RoundOptions{mode, ftz, sat}, fails);
  fails.expect_none(std::string(name(f)) + " sqrt all patterns");
}

// All 2^24 FMA triples: every mode plain, plus RNE with FTZ and with saturate.
TEST_P(Fp8All, SlowFmaAllTriples) {
  const Format f = GetParam();
  Failures fails;
  std::vector<double> v(256);
  for (std::uint32_t i = 0; i < 256; ++i) v[i] = decode(f, i);
  const RoundOptions variants[] = {{Rounding::nearest_even},
                                   {Rounding::toward_zero},
                                   {Rounding::up},
                                   {Rounding::down},
                                   {Rounding::to_odd},
                                   {Rounding::nearest_even, true, false},
                                   {Rounding::nearest_even, false, true}};
  for (double a : v)
    for (double b : v)
      for (double c : v)
        for (const RoundOptions& o : variants) check(kvconf_impl, f, Op::fma, a, b, c, o, fails);
  fails.expect_none(std::string(name(f)) + " fma all triples");
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8All, ::testing::Values(Format::fp8_e4m3, Format::fp8_e5m2),
                         [](const auto& p) { return std::string(name(p.param)); });

// ======================= targeted hard cases =======================

struct Hard {
  Format f;
  Op op;
  double a, b, c;
  RoundOptions o;
  double want;
  const char* what;
};

const double u11 = std::ldexp(1.0, -11), u10 = std::ldexp(1.0, -10), s24 = std::ldexp(1.0, -24);
const double n14 = std::ldexp(1.0, -14);
constexpr RoundOptions RNE{Rounding::nearest_even}, RZ{Rounding::toward_zero}, UP{Rounding::up}, DOWN{Rounding::down},
    ODD{Rounding::to_odd}, RNE_SAT{Rounding::nearest_even, false, true}, RNE_FTZ{Rounding::nearest_even, true, false},
    RZ_FTZ{Rounding::toward_zero, true, false};

// Checks each hand-derived expectation against both kvconf and MPFR, then every mode and option
// combination of the same operands against MPFR.
void check_hard(const std::vector<Hard>& cases) {
  Failures sweep;
  for (const Hard& h : cases) {
    const double got = kvconf_impl(h.f, h.op, h.a, h.b, h.c, h.o);
    const double mp = ref::op_mpfr(h.f, h.op, h.a, h.b, h.c, h.o);
    EXPECT_TRUE(same(got, h.want)) << h.what << " [" << name(h.f) << " " << op_name(h.op) << " " << opts_str(h.o)
                                   << "]: kvconf " << hex(got) << ", expected " << hex(h.want);
    EXPECT_TRUE(same(mp, h.want)) << h.what << " [" << name(h.f) << " " << op_name(h.op) << " " << opts_str(h.o)
                                  << "]: MPFR " << hex(mp) << ", expected " << hex(h.want);
    for (Rounding mode : kModes)
      for (bool ftz : {false, true})
        for (bool sat : {false, true})
          check(kvconf_impl, h.f, h.op, h.a, h.b, h.c, RoundOptions{mode, ftz, sat}, sweep);
  }
  sweep.expect_none("hard-case operands in every mode");
}

TEST(ArithHardCases, Ties) {
  const Format H = Format::fp16, B = Format::bf16;
  check_hard({
      {H, Op::add, 1, u11, 0, RNE, 1.0, "1 + half ulp: tie to even (down)"},
      {H, Op::add, 1, u11, 0, RZ, 1.0, "tie, RZ"},
      {H, Op::add, 1, u11, 0, UP, 1 + u10, "tie, up"},
      {H, Op::add, 1, u11, 0, DOWN, 1.0, "tie, down"},
      {H, Op::add, 1, u11, 0, ODD, 1 + u10, "tie, to odd"},
      {H, Op::add, 1 + u10, u11, 0, RNE, 1 + 2 * u10, "tie to even (up)"},
      {H, Op::add, -1, -u11, 0, RNE, -1.0, "negative tie"},
      {H, Op::add, -1, -u11, 0, DOWN, -(1 + u10), "negative tie, down"},
      {H, Op::add, -1, -u11, 0, UP, -1.0, "negative tie, up"},
      {H, Op::sub, 1, u11 / 2, 0, RNE, 1.0, "1 - 2^-12: tie in the binade below, to even (1)"},
      {H, Op::sub, 1, u11 / 2, 0, RZ, 1 - u11, "1 - 2^-12, RZ"},
      {H, Op::mul, 1.5, 1 + u10, 0, RNE, 1.5 + 2 * u10, "product exactly a midpoint"},
      {H, Op::mul, 1.5, 1 + u10, 0, RZ, 1.5 + u10, "product midpoint, RZ"},
      {H, Op::div, s24, 2, 0, RNE, 0.0, "half the smallest subnormal: tie with 0"},
      {H, Op::div, 3 * s24, 2, 0, RNE, 2 * s24, "subnormal quotient tie to even"},
      {H, Op::fma, 1, 1, u11, RNE, 1.0, "fma exact tie"},
      {H, Op::fma, 1, 1, s24, RNE, 1.0, "fma: a hair above 1, RNE"},
      {H, Op::fma, 1, 1, s24, UP, 1 + u10, "fma: a hair above 1, up"},
      {H, Op::fma, 1, 1, -s24, RZ, 1 - u11, "fma: a hair below 1 is in the binade below"},
      {H, Op::fma, 1, 1, -s24, DOWN, 1 - u11, "fma: a hair below 1, down"},
      {H, Op::add, 1, s24, 0, UP, 1 + u10, "add a hair, up"},
      {B, Op::add, 1, std::ldexp(1.0, -8), 0, RNE, 1.0, "bf16 tie to even"},
      {B, Op::add, 1, std::ldexp(1.0, -8), 0, UP, 1 + std::ldexp(1.0, -7), "bf16 tie, up"},
      {B, Op::fma, 1, 1, -std::ldexp(1.0, -133), DOWN, 1 - std::ldexp(1.0, -8), "bf16 fma a hair below 1, down"},
      {Format::fp8_e4m3, Op::add, 1, 0.0625, 0, RNE, 1.0, "e4m3 tie to even"},
      {Format::fp8_e5m2, Op::add, 1.25, 0.125, 0, RNE, 1.5, "e5m2 tie to even (up)"},
  });
}

TEST(ArithHardCases, SubnormalResults) {
  const Format H = Format::fp16, B = Format::bf16;
  check_hard({
      {H, Op::mul, n14, 0.5, 0, RNE, n14 / 2, "exact subnormal product"},
      {H, Op::mul, n14, 0.5 + u11, 0, RNE, n14 / 2, "subnormal tie to even"},
      {H, Op::mul, n14, 0.5 + u11, 0, UP, n14 / 2 + s24, "subnormal tie, up"},
      {H, Op::mul, s24, 0.75, 0, RNE, s24, "0.75 of the smallest subnormal"},
      {H, Op::mul, s24, 0.75, 0, RZ, 0.0, "0.75 of the smallest subnormal, RZ"},
      {H, Op::mul, -s24, 0.25, 0, RNE, -0.0, "underflow to -0"},
      {H, Op::mul, -s24, 0.25, 0, DOWN, -s24, "underflow, down"},
      {H, Op::mul, -s24, 0.25, 0, UP, -0.0, "underflow, up"},
      {H, Op::sub, n14, 1023 * s24, 0, RNE, s24, "gradual underflow: difference of normals"},
      {H, Op::mul, 1 - u11, n14, 0, RNE, n14, "rounds up to the smallest normal"},
      {H, Op::mul, 1 - u11, n14, 0, RZ, 1023 * s24, "largest subnormal"},
      {H, Op::div, n14, 1024, 0, RNE, s24, "quotient = smallest subnormal"},
      {H, Op::fma, n14, 0.5, s24, RNE, n14 / 2 + s24, "fma into the subnormal range"},
      {H, Op::sqrt, s24, 0, 0, RNE, std::ldexp(1.0, -12), "sqrt of a subnormal"},
      {B, Op::mul, std::ldexp(1.0, -126), std::ldexp(1.0, -7), 0, RNE, std::ldexp(1.0, -133),
       "bf16 smallest subnormal"},
      {B, Op::mul, std::ldexp(1.0, -126), std::ldexp(1.0, -8), 0, RNE, 0.0, "bf16 tie with 0"},
      {B, Op::mul, std::ldexp(1.0, -126), std::ldexp(1.0, -8), 0, UP, std::ldexp(1.0, -133), "bf16 underflow, up"},
      {Format::fp8_e4m3, Op::mul, 0.015625, 0.125, 0, RNE, std::ldexp(1.0, -9), "e4m3 smallest subnormal"},
      {Format::fp8_e5m2, Op::mul, std::ldexp(1.0, -14), 0.375, 0, RNE, std::ldexp(1.0, -15),
       "e5m2 0.375·2^-14 = 1.5 subnormal ulps: tie to even (2)"},
  });
}

TEST(ArithHardCases, Overflow) {
  const Format H = Format::fp16, E4 = Format::fp8_e4m3, E5 = Format::fp8_e5m2, B = Format::bf16;
  const double bmax = info(B).max_finite;
  check_hard({
      {H, Op::add, 65504, 16, 0, RNE, kInf, "max + half ulp: tie goes to the (even) overflow"},
      {H, Op::add, 65504, 16, 0, RZ, 65504, "RZ clamps"},
      {H, Op::add, 65504, 16, 0, UP, kInf, "up overflows"},
      {H, Op::add, 65504, 16, 0, DOWN, 65504, "down clamps positive"},
      {H, Op::add, 65504, 16, 0, ODD, 65504, "to odd clamps"},
      {H, Op::add, 65504, 16, 0, RNE_SAT, 65504, "saturate"},
      {H, Op::add, -65504, -16, 0, RNE, -kInf, "negative overflow"},
      {H, Op::add, -65504, -16, 0, DOWN, -kInf, "negative overflow, down"},
      {H, Op::add, -65504, -16, 0, UP, -65504, "negative overflow, up clamps"},
      {H, Op::add, 65504, 8, 0, RNE, 65504, "below the overflow threshold"},
      {H, Op::add, 65504, 8, 0, UP, kInf, "above max, up"},
      {H, Op::mul, 256, 256, 0, RNE, kInf, "2^16"},
      {H, Op::mul, 256, 256, 0, RZ, 65504, "2^16, RZ"},
      {H, Op::div, 65504, 0.5, 0, RNE, kInf, "quotient overflow"},
      {H, Op::fma, 256, 256, -16, RNE, kInf, "fma overflow"},
      {E4, Op::add, 448, 16, 0, RNE, 448, "e4m3: 464 ties to the even 448"},
      {E4, Op::add, 448, 32, 0, RNE, kNaN, "e4m3: 480 overflows to NaN (no infinity)"},
      {E4, Op::add, 448, 32, 0, RNE_SAT, 448, "e4m3 saturating"},
      {E4, Op::mul, 16, 32, 0, RNE, kNaN, "e4m3 512"},
      {E4, Op::mul, -16, 32, 0, RNE_SAT, -448, "e4m3 -512 saturating"},
      {E4, Op::add, 448, 1, 0, UP, kNaN, "e4m3 449, up"},
      {E5, Op::add, 57344, 4096, 0, RNE, kInf, "e5m2 61440: tie, odd significand, overflow"},
      {E5, Op::add, 57344, 4096, 0, RNE_SAT, 57344, "e5m2 saturating"},
      {B, Op::add, bmax, bmax, 0, RNE, kInf, "bf16 overflow"},
      {B, Op::add, bmax, bmax, 0, RZ, bmax, "bf16 overflow, RZ"},
  });
}

TEST(ArithHardCases, ExactCancellationSignOfZero) {
  std::vector<Hard> cases;
  for (Format f : {Format::fp16, Format::bf16, Format::fp8_e4m3, Format::fp8_e5m2, Format::fp32}) {
    for (Rounding r : kModes) {
      const RoundOptions o{r};
      const double z = (r == Rounding::down) ? -0.0 : 0.0;  // IEEE 754 §6.3: x − x is −0 only when rounding down
      cases.push_back({f, Op::add, 1, -1, 0, o, z, "1 + (-1)"});
      cases.push_back({f, Op::add, -1.5, 1.5, 0, o, z, "-1.5 + 1.5"});
      cases.push_back({f, Op::sub, 2, 2, 0, o, z, "2 - 2"});
      cases.push_back({f, Op::add, 0.0, -0.0, 0, o, z, "+0 + -0"});
      cases.push_back({f, Op::sub, 0.0, 0.0, 0, o, z, "+0 - +0"});
      cases.push_back({f, Op::add, -0.0, -0.0, 0, o, -0.0, "-0 + -0"});
      cases.push_back({f, Op::sub, -0.0, 0.0, 0, o, -0.0, "-0 - +0"});
      cases.push_back({f, Op::add, 0.0, 0.0, 0, o, 0.0, "+0 + +0"});
      cases.push_back({f, Op::fma, 2, 3, -6, o, z, "fma 2·3 - 6"});
      cases.push_back({f, Op::fma, -2, 3, 6, o, z, "fma -2·3 + 6"});
      cases.push_back({f, Op::fma, 0.0, 5, -0.0, o, z, "fma +0·5 + -0"});
      cases.push_back({f, Op::fma, -0.0, 5, -0.0, o, -0.0, "fma -0·5 + -0"});
      cases.push_back({f, Op::fma, -0.0, 5, 0.0, o, z, "fma -0·5 + +0"});
      cases.push_back({f, Op::mul, -0.0, 5, 0, o, -0.0, "-0 · 5"});
      cases.push_back({f, Op::mul, -0.0, -0.0, 0, o, 0.0, "-0 · -0"});
      cases.push_back({f, Op::div, 0.0, -5, 0, o, -0.0, "+0 / -5"});
      cases.push_back({f, Op::sqrt, -0.0, 0, 0, o, -0.0, "sqrt(-0)"});
    }
  }
  check_hard(cases);
}

TEST(ArithHardCases, FmaDoubleRoundingCounterexamples) {
  // notes/numerics.md §4.3: the exact a·b + c lies a hair off a midpoint of the target.
  check_hard({
      {Format::fp16, Op::fma, 3, 683.0 / 1024, s24, RNE, 2.001953125, "fp16: a=3, b=683/1024, c=2^-24"},
      {Format::bf16, Op::fma, 1.75, 0.578125, -std::ldexp(1.0, -100), RNE, 1.0078125,
       "bf16: a=1.75, b=0.578125, c=-2^-100"},
      {Format::fp16, Op::fma, -3, 683.0 / 1024, -s24, RNE, -2.001953125, "fp16 counterexample, negated"},
      {Format::bf16, Op::fma, 1.75, 0.578125, std::ldexp(1.0, -100), RNE, 1.015625, "bf16: other side of the midpoint"},
  });
}

TEST(ArithHardCases, NanAndInfinity) {
  const Format H = Format::fp16, E4 = Format::fp8_e4m3;
  check_hard({
      {H, Op::add, kNaN, 1, 0, RNE, kNaN, "NaN + 1"},
      {H, Op::add, kInf, -kInf, 0, RNE, kNaN, "inf - inf"},
      {H, Op::sub, kInf, kInf, 0, RNE, kNaN, "inf - inf (sub)"},
      {H, Op::add, kInf, 1, 0, RNE, kInf, "inf + 1"},
      {H, Op::add, -kInf, 65504, 0, RZ, -kInf, "-inf stays -inf in RZ"},
      {H, Op::add, kInf, 1, 0, RNE_SAT, kInf, "saturate does not clamp an infinite result in fp16"},
      {H, Op::mul, kInf, 0.0, 0, RNE, kNaN, "inf · 0"},
      {H, Op::mul, -kInf, 2, 0, RNE, -kInf, "-inf · 2"},
      {H, Op::mul, kNaN, 0.0, 0, RNE, kNaN, "NaN · 0"},
      {H, Op::div, kInf, kInf, 0, RNE, kNaN, "inf / inf"},
      {H, Op::div, -1, kInf, 0, RNE, -0.0, "-1 / inf"},
      {H, Op::fma, kInf, 0.0, 1, RNE, kNaN, "fma(inf, 0, 1)"},
      {H, Op::fma, kInf, 1, -kInf, RNE, kNaN, "fma(inf, 1, -inf)"},
      {H, Op::fma, 1, 1, kNaN, RNE, kNaN, "fma(1, 1, NaN)"},
      {H, Op::fma, kNaN, 0.0, 1, RNE, kNaN, "fma(NaN, 0, 1)"},
      {H, Op::fma, kInf, 2, 1, RNE, kInf, "fma(inf, 2, 1)"},
      {H, Op::fma, 1, 1, -kInf, RNE, -kInf, "fma(1, 1, -inf)"},
      {H, Op::sqrt, kInf, 0, 0, RNE, kInf, "sqrt(inf)"},
      {E4, Op::add, kNaN, 1, 0, RNE_SAT, kNaN, "e4m3 NaN stays NaN when saturating"},
      {E4, Op::mul, kNaN, 0.0, 0, RNE, kNaN, "e4m3 NaN · 0"},
  });
}

TEST(ArithHardCases, SqrtOfNegativeIsNan) {
  std::vector<Hard> cases;
  for (Format f : {Format::fp16, Format::bf16, Format::fp8_e4m3, Format::fp8_e5m2, Format::fp32})
    for (double a : {-1.0, -info(f).min_subnormal, -info(f).max_finite, -kInf})
      for (Rounding r : kModes) cases.push_back({f, Op::sqrt, a, 0, 0, RoundOptions{r}, kNaN, "sqrt(negative)"});
  check_hard(cases);
}

TEST(ArithHardCases, DivisionByZero) {
  const Format H = Format::fp16, B = Format::bf16, E4 = Format::fp8_e4m3, E5 = Format::fp8_e5m2;
  check_hard({
      {H, Op::div, 1, 0.0, 0, RNE, kInf, "1 / +0"},
      {H, Op::div, 1, -0.0, 0, RNE, -kInf, "1 / -0"},
      {H, Op::div, -1, 0.0, 0, RNE, -kInf, "-1 / +0"},
      {H, Op::div, -1, -0.0, 0, RZ, kInf, "-1 / -0 (an exact infinity: RZ does not clamp it)"},
      {H, Op::div, 0.0, 0.0, 0, RNE, kNaN, "0 / 0"},
      {B, Op::div, s24, 0.0, 0, DOWN, kInf, "bf16 tiny / +0"},
      {E5, Op::div, 1, 0.0, 0, RNE, kInf, "e5m2 1 / 0"},
      {E4, Op::div, 1, 0.0, 0, RNE, kNaN, "e4m3 has no infinity: 1 / 0 is NaN"},
      {E4, Op::div, -1, 0.0, 0, RNE_SAT, -448, "e4m3 saturating: infinite results clamp (rounding.hpp)"},
  });
}

TEST(ArithHardCases, FlushToZeroResults) {
  const Format H = Format::fp16;
  check_hard({
      {H, Op::sub, n14, 1023 * s24, 0, RNE_FTZ, 0.0, "subnormal difference flushes to +0"},
      {H, Op::sub, 1023 * s24, n14, 0, RNE_FTZ, -0.0, "negative subnormal difference flushes to -0"},
      {H, Op::mul, 1 - u11, n14, 0, RNE_FTZ, n14, "rounded to min normal: kept"},
      {H, Op::mul, 1 - u11, n14, 0, RZ_FTZ, 0.0, "rounded below min normal: flushed"},
      {H, Op::mul, -s24, 0.5, 0, RoundOptions{Rounding::down, true, false}, -0.0, "down to -2^-24, then flushed"},
      {Format::bf16, Op::fma, std::ldexp(1.0, -126), -0.5, 0.0, RNE_FTZ, -0.0, "bf16 fma flush, sign kept"},
      {Format::fp8_e4m3, Op::mul, 0.015625, 0.5, 0, RNE_FTZ, 0.0, "e4m3 flush"},
  });
}

// ======================= the naive routes are wrong, and the checks see it =======================

TEST(NaiveRoutes, Fp16ViaFmafDoubleRounds) {
  const double a = 3, b = 683.0 / 1024, c = s24;
  const float viaf = std::fmaf(3.0f, 683.0f / 1024, static_cast<float>(c));
  EXPECT_EQ(static_cast<double>(static_cast<_Float16>(viaf)), 2.0);  // RN16(fmaf): compiler conversion
  EXPECT_EQ(naive_fmaf_route(Format::fp16, Op::fma, a, b, c, RNE), 2.0);
  EXPECT_EQ(kvconf::fma(Format::fp16, a, b, c), 2.001953125);
  EXPECT_EQ(ref::op_mpfr(Format::fp16, Op::fma, a, b, c), 2.001953125);
}

TEST(NaiveRoutes, Bf16ViaDoubleFmaDoubleRounds) {
  const double a = 1.75, b = 0.578125, c = -std::ldexp(1.0, -100);
  EXPECT_EQ(naive_double_fma_route(Format::bf16, Op::fma, a, b, c, RNE), 1.015625);
  EXPECT_EQ(kvconf::fma(Format::bf16, a, b, c), 1.0078125);
  EXPECT_EQ(ref::op_mpfr(Format::bf16, Op::fma, a, b, c), 1.0078125);
}

// fp16 triples whose product a·b is exactly an fp16 midpoint in [1, 64) and c a tiny ±k·2^-24: fmaf
// absorbs c, so the route sees an exact tie.
std::vector<Triple> fp16_midpoint_triples(std::mt19937_64& rng, int n) {
  Gen g(Format::fp16, rng);
  std::vector<Triple> out;
  while (static_cast<int>(out.size()) < n) {
    const double a = g.val(g.make(g.coin(), 15 + g.range(0, 2), static_cast<std::uint32_t>(rng()) & 0x3E0u));
    const double b = g.val(g.make(g.coin(), 15 + g.range(0, 2), static_cast<std::uint32_t>(rng()) & 0x3F8u));
    const double p = a * b;
    const double q = std::ldexp(1.0, std::ilogb(p) - 10);  // fp16 ulp at p
    if (std::fabs(p) < 1 || std::fabs(p / q - std::trunc(p / q)) != 0.5) continue;
    out.push_back({a, b, (g.coin() ? 1 : -1) * g.range(1, 4) * s24});
  }
  return out;
}

TEST(NaiveRoutes, SweepRejectsFp16ViaFmaf) {
  std::mt19937_64 rng(test_seed());
  const auto triples = fp16_midpoint_triples(rng, 20000);
  Failures naive, ours, via_double;
  naive.set_seed(test_seed());
  ours.set_seed(test_seed());
  via_double.set_seed(test_seed());
  for (const Triple& t : triples) {
    check(naive_fmaf_route, Format::fp16, Op::fma, t.a, t.b, t.c, RNE, naive);
    check(kvconf_impl, Format::fp16, Op::fma, t.a, t.b, t.c, RNE, ours);
    check(naive_double_fma_route, Format::fp16, Op::fma, t.a, t.b, t.c, RNE, via_double);
  }
  EXPECT_GT(naive.failed, naive.checked / 10) << "RN16(fmaf) should misround a large share of these triples";
  std::printf("[   info   ] RN16(fmaf): %llu of %llu triples misrounded\n",
              static_cast<unsigned long long>(naive.failed), static_cast<unsigned long long>(naive.checked));
  ours.expect_none("kvconf fp16 fma on midpoint triples");
  // notes/numerics.md §4.3: RN16 of a binary64 fma is correct (in RNE) for fp16.
  via_double.expect_none("RN16(double fma) on midpoint triples");
}

TEST(NaiveRoutes, SweepRejectsBf16ViaDoubleFma) {
  std::mt19937_64 rng(test_seed());
  Failures naive, ours;
  naive.set_seed(test_seed());
  ours.set_seed(test_seed());
  Gen g(Format::bf16, rng);
  for (int i = 0; i < 100000; ++i) {
    const double a = g.val(g.uniform()), b = g.val(g.uniform()), c = g.val(g.uniform());
    check(naive_double_fma_route, Format::bf16, Op::fma, a, b, c, RNE, naive);
    check(kvconf_impl, Format::bf16, Op::fma, a, b, c, RNE, ours);
  }
  EXPECT_GT(naive.failed, 0u) << "RN_bf16(double fma) should misround some uniform bf16 triples (about 0.2%)";
  std::printf("[   info   ] RN_bf16(double fma): %llu of %llu uniform triples misrounded\n",
              static_cast<unsigned long long>(naive.failed), static_cast<unsigned long long>(naive.checked));
  ours.expect_none("kvconf bf16 fma on uniform triples");
}

}  // namespace
}  // namespace kvconf
