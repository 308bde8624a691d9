// Conversion tests: decode/encode/round_to of fp16, bf16, fp8 (and fp32/fp64 targets) checked bit for bit
// against MPFR (ref::round_mpfr) and against independent decoders (_Float16, bf16 bits<<16, an FP8 formula).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>
#include <ostream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <mpfr.h>

#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/mpfr_format.hpp"
#include "test_support.hpp"

namespace kvconf {

// Test-name suffixes (CMake's gtest discovery appends the printed parameter): print formats by name.
inline void PrintTo(Format f, std::ostream* os) { *os << name(f); }

namespace {

using namespace kvconf::test;

constexpr Rounding kModes[] = {Rounding::nearest_even, Rounding::toward_zero, Rounding::up, Rounding::down,
                               Rounding::to_odd};
constexpr Format kNarrow[] = {Format::fp16, Format::bf16, Format::fp8_e4m3, Format::fp8_e5m2};

// ---------- independent decoders (no kvconf code) ----------

double fp16_by_compiler(std::uint32_t b) {
  return static_cast<double>(static_cast<float>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(b))));
}
double bf16_by_shift(std::uint32_t b) { return static_cast<double>(std::bit_cast<float>(b << 16)); }
// OCP 8-bit FP v1.0: E4M3 bias 7, no inf, NaN = S.1111.111; E5M2 bias 15, IEEE-like specials.
double e4m3_by_formula(std::uint32_t b) {
  const double s = (b & 0x80) ? -1.0 : 1.0;
  const unsigned e = (b >> 3) & 0xF, m = b & 0x7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return s * (m / 8.0) * (1.0 / 64.0);
  return s * (1.0 + m / 8.0) * std::pow(2.0, static_cast<int>(e) - 7);
}
double e5m2_by_formula(std::uint32_t b) {
  const double s = (b & 0x80) ? -1.0 : 1.0;
  const unsigned e = (b >> 2) & 0x1F, m = b & 0x3;
  if (e == 31) return m == 0 ? s * HUGE_VAL : std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return s * (m / 4.0) * (1.0 / 16384.0);
  return s * (1.0 + m / 4.0) * std::pow(2.0, static_cast<int>(e) - 15);
}

double indep_decode(Format f, std::uint32_t b) {
  switch (f) {
    case Format::fp16:
      return fp16_by_compiler(b);
    case Format::bf16:
      return bf16_by_shift(b);
    case Format::fp8_e4m3:
      return e4m3_by_formula(b);
    case Format::fp8_e5m2:
      return e5m2_by_formula(b);
    case Format::fp32:
      return static_cast<double>(std::bit_cast<float>(b));
    case Format::fp64:
      break;
  }
  throw std::logic_error("indep_decode: no 32-bit patterns for fp64");
}

int width(Format f) {
  switch (f) {
    case Format::fp8_e4m3:
    case Format::fp8_e5m2:
      return 8;
    case Format::fp16:
    case Format::bf16:
      return 16;
    case Format::fp32:
      return 32;
    case Format::fp64:
      return 64;
  }
  return 0;
}

// Independent encoder for values representable in f (built by inverting indep_decode).
std::uint32_t indep_encode(Format f, double v) {
  if (f == Format::fp32) return std::bit_cast<std::uint32_t>(static_cast<float>(v));
  static std::unordered_map<std::uint64_t, std::uint32_t> tables[4];
  const int i = static_cast<int>(f);  // fp8_e4m3, fp8_e5m2, bf16, fp16 are 0..3
  auto& t = tables[i];
  if (t.empty()) {
    for (std::uint32_t b = 0; b < (1u << width(f)); ++b) {
      const double d = indep_decode(f, b);
      if (!std::isnan(d)) t.emplace(std::bit_cast<std::uint64_t>(d), b);
    }
  }
  const auto it = t.find(std::bit_cast<std::uint64_t>(v));
  if (it == t.end()) throw std::logic_error("indep_encode: " + hex(v) + " is not a value of " + std::string(name(f)));
  return it->second;
}

// ---------- MPFR helpers ----------

struct Mpfr {
  mpfr_t v;
  explicit Mpfr(mpfr_prec_t p = 160) { mpfr_init2(v, p); }
  ~Mpfr() { mpfr_clear(v); }
  Mpfr(const Mpfr&) = delete;
  Mpfr& operator=(const Mpfr&) = delete;
  // Exactly x + tail·2^(ilogb(x) − 70) (a value strictly between x and its double neighbours).
  void set(Tailed t) {
    mpfr_set_d(v, t.x, MPFR_RNDN);
    if (t.tail != 0 && std::isfinite(t.x) && t.x != 0.0) {
      Mpfr e(8);
      mpfr_set_si_2exp(e.v, t.tail, std::ilogb(t.x) - 70, MPFR_RNDN);
      mpfr_add(v, v, e.v, MPFR_RNDN);  // exact: 124 bits needed, 160 available
    }
  }
};

// Checks round_to(f, v, o) and encode(f, v, o) against MPFR, bit for bit.
void check_one(Format f, Tailed v, RoundOptions o, Mpfr& m, Failures& fails) {
  m.set(v);
  const double want = ref::round_mpfr(f, m.v, o);
  const double got = round_to(f, v, o);
  ++fails.checked;
  const auto describe = [&] {
    return std::string(name(f)) + " " + opts_str(o) + " x=" + hex(v.x) +
           (v.tail > 0   ? "+eps"
            : v.tail < 0 ? "-eps"
                         : "");
  };
  if (!same(got, want)) {
    fails.add(describe() + ": round_to=" + hex(got) + " mpfr=" + hex(want));
    return;
  }
  if (f == Format::fp64) return;
  const std::uint32_t bits = encode(f, v, o);
  if (std::isnan(want)) {
    if (!std::isnan(indep_decode(f, bits))) fails.add(describe() + ": encode=" + hexbits(bits) + " is not NaN");
  } else if (bits != indep_encode(f, want)) {
    fails.add(describe() + ": encode=" + hexbits(bits) + " want " + hexbits(indep_encode(f, want)));
  }
}

RoundOptions opts(Rounding r, bool ftz, bool sat) { return RoundOptions{r, ftz, sat}; }

// ======================= decode =======================

class DecodeAllPatterns : public ::testing::TestWithParam<Format> {};

TEST_P(DecodeAllPatterns, MatchesIndependentDecoder) {
  const Format f = GetParam();
  const FormatInfo& fi = info(f);
  Failures fails;
  int nans = 0, infs = 0, zeros = 0, subnormals = 0;
  for (std::uint32_t b = 0; b < (1u << fi.bits); ++b) {
    const double want = indep_decode(f, b);
    const double got = decode(f, b);
    ++fails.checked;
    if (!same(got, want)) fails.add(hexbits(b) + ": decode=" + hex(got) + " independent=" + hex(want));
    if (std::isnan(got))
      ++nans;
    else if (std::isinf(got))
      ++infs;
    else if (got == 0.0)
      ++zeros;
    else if (std::fabs(got) < fi.min_normal)
      ++subnormals;
    // DAZ: subnormals read as zero of the same sign, everything else unchanged.
    const double daz = decode(f, b, /*daz=*/true);
    const bool sub = std::isfinite(want) && want != 0.0 && std::fabs(want) < fi.min_normal;
    const double want_daz = sub ? std::copysign(0.0, want) : want;
    if (!same(daz, want_daz)) fails.add(hexbits(b) + ": decode(daz)=" + hex(daz) + " want " + hex(want_daz));
  }
  fails.expect_none("decode");
  // Pattern census: NaNs, infinities, zeros and subnormals each where the format puts them.
  const int man_patterns = 1 << fi.man_bits;
  EXPECT_EQ(nans, fi.has_inf() ? 2 * (man_patterns - 1) : 2);
  EXPECT_EQ(infs, fi.has_inf() ? 2 : 0);
  EXPECT_EQ(zeros, 2);
  EXPECT_EQ(subnormals, 2 * (man_patterns - 1));
}

INSTANTIATE_TEST_SUITE_P(Formats, DecodeAllPatterns, ::testing::ValuesIn(kNarrow),
                         [](const auto& p) { return std::string(name(p.param)); });

TEST(DecodeEncodeErrors, PatternWiderThanFormatThrows) {
  EXPECT_THROW(decode(Format::fp16, 0x10000u), std::invalid_argument);
  EXPECT_THROW(decode(Format::bf16, 0xFFFFFFFFu), std::invalid_argument);
  EXPECT_THROW(decode(Format::fp8_e4m3, 0x100u), std::invalid_argument);
  EXPECT_THROW(decode(Format::fp8_e5m2, 0x1FFu), std::invalid_argument);
  EXPECT_NO_THROW(decode(Format::fp16, 0xFFFFu));
  EXPECT_NO_THROW(decode(Format::fp32, 0xFFFFFFFFu));
}

TEST(DecodeEncodeErrors, Fp64BitPatternsThrow) {
  EXPECT_THROW(encode(Format::fp64, 1.0), std::invalid_argument);
  EXPECT_THROW(encode(Format::fp64, Tailed{1.0, 1}), std::invalid_argument);
  EXPECT_THROW(decode(Format::fp64, 0u), std::invalid_argument);
  EXPECT_THROW(nan_bits(Format::fp64), std::invalid_argument);
}

// ======================= round trip =======================

class RoundTripAllPatterns : public ::testing::TestWithParam<Format> {};

TEST_P(RoundTripAllPatterns, EncodeOfDecodeIsIdentity) {
  const Format f = GetParam();
  const FormatInfo& fi = info(f);
  const std::uint32_t sign = 1u << (fi.bits - 1);
  Failures fails;
  for (std::uint32_t b = 0; b < (1u << fi.bits); ++b) {
    const double v = decode(f, b);
    for (Rounding r : kModes) {
      for (bool sat : {false, true}) {
        ++fails.checked;
        const std::uint32_t got = encode(f, v, opts(r, false, sat));
        if (std::isnan(v)) {
          if (!std::isnan(decode(f, got)))
            fails.add(hexbits(b) + " " + mode_name(r) + ": NaN encodes to " + hexbits(got));
          continue;
        }
        if (got != b)
          fails.add(hexbits(b) + " " + mode_name(r) + (sat ? "+sat" : "") + ": encode(decode)=" + hexbits(got));
        if (!same(round_to(f, v, opts(r, false, sat)), v))
          fails.add(hexbits(b) + " " + mode_name(r) + ": round_to(decode) != decode");
        // With FTZ, subnormals flush to the zero of their sign; everything else is unchanged.
        const bool sub = v != 0.0 && std::isfinite(v) && std::fabs(v) < fi.min_normal;
        const std::uint32_t want_ftz = sub ? (b & sign) : b;
        const std::uint32_t got_ftz = encode(f, v, opts(r, true, sat));
        ++fails.checked;
        if (got_ftz != want_ftz) fails.add(hexbits(b) + " " + mode_name(r) + "+ftz: encode=" + hexbits(got_ftz));
      }
    }
    EXPECT_TRUE(representable(f, v)) << hexbits(b);
  }
  fails.expect_none("round trip");
  // Canonical NaN pattern.
  EXPECT_TRUE(std::isnan(decode(f, nan_bits(f))));
  EXPECT_EQ(nan_bits(f) & sign, 0u);
}

INSTANTIATE_TEST_SUITE_P(Formats, RoundTripAllPatterns, ::testing::ValuesIn(kNarrow),
                         [](const auto& p) { return std::string(name(p.param)); });

// ======================= every pattern to every format =======================

struct ConvParam {
  Format from, to;
};
void PrintTo(const ConvParam& c, std::ostream* os) { *os << name(c.from) << " to " << name(c.to); }

class ConvertAllPatterns : public ::testing::TestWithParam<ConvParam> {};

// Every pattern of `from`, converted to `to` in every rounding mode, FTZ on/off, saturate on/off.
TEST_P(ConvertAllPatterns, MatchesMpfrBitForBit) {
  const auto [from, to] = GetParam();
  Failures fails;
  Mpfr m;
  for (std::uint32_t b = 0; b < (1u << width(from)); ++b) {
    const double x = indep_decode(from, b);
    for (Rounding r : kModes)
      for (bool ftz : {false, true})
        for (bool sat : {false, true}) check_one(to, Tailed{x, 0}, opts(r, ftz, sat), m, fails);
  }
  fails.expect_none("convert all patterns");
}

std::vector<ConvParam> all_conversions() {
  std::vector<ConvParam> v;
  for (Format from : kNarrow)
    for (Format to : kAllFormats) v.push_back({from, to});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Formats, ConvertAllPatterns, ::testing::ValuesIn(all_conversions()), [](const auto& p) {
  return std::string(name(p.param.from)) + "_to_" + std::string(name(p.param.to));
});

// ======================= midpoints =======================

class Midpoints : public ::testing::TestWithParam<Format> {};

// Every pair of adjacent values a < b of the format (including 0 and the virtual value above the
// largest finite one): a, the midpoint, the midpoint ± one double ulp, a·(1 ± tiny) via the Tailed
// residual, for both signs, in every mode with FTZ and saturate on/off.
TEST_P(Midpoints, AdjacentPairsMatchMpfr) {
  const Format f = GetParam();
  const FormatInfo& fi = info(f);
  std::vector<double> vals;
  for (std::uint32_t b = 0; b < (1u << (fi.bits - 1)); ++b) {
    const double d = indep_decode(f, b);
    if (std::isfinite(d)) vals.push_back(d);
  }
  ASSERT_TRUE(std::is_sorted(vals.begin(), vals.end()));
  // The value one ulp above max_finite (2^(emax+1) for IEEE-like formats; 480 for E4M3).
  vals.push_back(vals.back() + (vals.back() - vals[vals.size() - 2]));
  Failures fails;
  Mpfr m;
  for (std::size_t i = 0; i + 1 < vals.size(); ++i) {
    const double a = vals[i], b = vals[i + 1], mid = (a + b) / 2;
    const Tailed pts[] = {
        {a, 0}, {mid, 0}, {std::nextafter(mid, 0.0), 0}, {std::nextafter(mid, HUGE_VAL), 0}, {mid, 1}, {mid, -1},
        {a, 1}, {a, -1},  {std::nextafter(b, 0.0), 0}};
    for (const Tailed& t : pts) {
      if (t.x == 0.0 && t.tail != 0) continue;  // a zero double with a residual is out of Tailed's contract
      for (double s : {1.0, -1.0}) {
        const Tailed v{s * t.x, s > 0 ? t.tail : -t.tail};
        for (Rounding r : kModes)
          for (bool ftz : {false, true})
            for (bool sat : {false, true}) check_one(f, v, opts(r, ftz, sat), m, fails);
      }
    }
  }
  fails.expect_none("midpoints");
}

INSTANTIATE_TEST_SUITE_P(Formats, Midpoints, ::testing::ValuesIn(kNarrow),
                         [](const auto& p) { return std::string(name(p.param)); });

// ======================= random doubles to every format =======================

class RandomDoubles : public ::testing::TestWithParam<Format> {};

// Doubles spread over the target's whole exponent range (and past it), half with random low bits and
// half with structured low bits (ties, near-ties), with a random residual sign; every mode.
TEST_P(RandomDoubles, MatchMpfr) {
  const Format f = GetParam();
  const FormatInfo& fi = info(f);
  Failures fails;
  fails.set_seed(test_seed());
  std::mt19937_64 rng(fails.seed);
  Mpfr m;
  const int lo = std::max(fi.emin - fi.p - 3, -1022), hi = std::min(fi.emax + 2, 1023);
  std::uniform_int_distribution<int> exp_dist(lo, hi);
  constexpr int kSamples = 100000;
  for (int i = 0; i < kSamples; ++i) {
    const std::uint64_t r = rng();
    std::uint64_t man = rng() & ((std::uint64_t{1} << 52) - 1);
    const int kept = std::min(fi.p + 1, 52);  // significand bits that matter for the target, plus the round bit
    switch (r & 3) {
      case 0:
        break;  // random low bits
      case 1:
        man &= ~((std::uint64_t{1} << (52 - kept + 1)) - 1);
        break;  // exact tie or exact value
      case 2:
        man |= (std::uint64_t{1} << (52 - kept + 1)) - 1;
        break;  // just below a boundary
      case 3:
        man = (man & ~((std::uint64_t{1} << (52 - kept + 1)) - 1)) | 1;
        break;  // just above
    }
    const int e = exp_dist(rng);
    double x = std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -52), e);
    if (x == 0.0 || !std::isfinite(x) || std::fabs(x) < std::numeric_limits<double>::min()) continue;
    if ((r >> 2) & 1) x = -x;
    const int tail = static_cast<int>((r >> 3) % 3) - 1;
    const bool ftz = (r >> 5) & 1, sat = (r >> 6) & 1;
    for (Rounding mode : kModes) check_one(f, Tailed{x, tail}, opts(mode, ftz, sat), m, fails);
  }
  // Special inputs.
  for (double x : {0.0, -0.0, HUGE_VAL, -HUGE_VAL, std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::max(), -std::numeric_limits<double>::denorm_min()})
    for (Rounding mode : kModes)
      for (bool ftz : {false, true})
        for (bool sat : {false, true}) check_one(f, Tailed{x, 0}, opts(mode, ftz, sat), m, fails);
  fails.expect_none("random doubles");
}

INSTANTIATE_TEST_SUITE_P(Formats, RandomDoubles, ::testing::ValuesIn(kAllFormats),
                         [](const auto& p) { return std::string(name(p.param)); });

// ======================= OCP FP8 and IEEE special-value rules =======================

TEST(SpecialValues, OcpE4M3) {
  const Format f = Format::fp8_e4m3;
  const RoundOptions sat{Rounding::nearest_even, false, true};
  EXPECT_EQ(info(f).max_finite, 448.0);
  EXPECT_FALSE(info(f).has_inf());
  EXPECT_EQ(encode(f, 448.0), 0x7Eu);
  EXPECT_EQ(encode(f, 256.0), 0x78u);  // S.1111.000 is a normal number in E4M3
  EXPECT_EQ(encode(f, 464.0), 0x7Eu);  // tie between 448 and (virtual) 480: to even, 448
  EXPECT_EQ(encode(f, 465.0), 0x7Fu);  // rounds to 480 > max: NaN when not saturating
  EXPECT_EQ(encode(f, 465.0, sat), 0x7Eu);
  EXPECT_EQ(encode(f, -1e6, sat), 0xFEu);
  EXPECT_EQ(encode(f, HUGE_VAL), 0x7Fu);  // no infinity: NaN
  EXPECT_EQ(encode(f, -HUGE_VAL, sat), 0xFEu);
  EXPECT_EQ(encode(f, std::numeric_limits<double>::quiet_NaN(), sat), 0x7Fu);  // NaN stays NaN
  EXPECT_EQ(encode(f, -0.0), 0x80u);
  EXPECT_EQ(encode(f, std::ldexp(1.0, -9)), 0x01u);   // min subnormal
  EXPECT_EQ(encode(f, std::ldexp(1.0, -10)), 0x00u);  // tie with 0: to even
  EXPECT_EQ(encode(f, std::ldexp(1.5, -10)), 0x01u);
  EXPECT_TRUE(std::isnan(decode(f, 0x7F)));
  EXPECT_TRUE(std::isnan(decode(f, 0xFF)));
  EXPECT_EQ(decode(f, 0x7E), 448.0);
  // Directed modes at the top: RZ and saturate clamp; RU of a large positive value overflows (NaN).
  EXPECT_EQ(encode(f, 470.0, {Rounding::toward_zero}), 0x7Eu);
  EXPECT_EQ(encode(f, 449.0, {Rounding::up}), 0x7Fu);
  EXPECT_EQ(encode(f, -449.0, {Rounding::up}), 0xFEu);
}

TEST(SpecialValues, OcpE5M2) {
  const Format f = Format::fp8_e5m2;
  const RoundOptions sat{Rounding::nearest_even, false, true};
  EXPECT_EQ(info(f).max_finite, 57344.0);
  EXPECT_EQ(encode(f, 57344.0), 0x7Bu);
  EXPECT_EQ(encode(f, 61440.0), 0x7Cu);  // tie, odd significand: rounds up to 2^16, overflow to inf
  EXPECT_EQ(encode(f, 61439.0), 0x7Bu);
  EXPECT_EQ(encode(f, 61440.0, sat), 0x7Bu);
  EXPECT_EQ(encode(f, HUGE_VAL), 0x7Cu);
  EXPECT_EQ(encode(f, -HUGE_VAL, sat), 0xFCu);  // saturate clamps finite overflow only; -inf stays -inf
  EXPECT_EQ(encode(f, -1e6, sat), 0xFBu);
  EXPECT_EQ(encode(f, std::ldexp(1.0, -16)), 0x01u);  // min subnormal 2^-16
}

TEST(SpecialValues, Fp16AndBf16) {
  EXPECT_EQ(encode(Format::fp16, 65519.99), 0x7BFFu);
  EXPECT_EQ(encode(Format::fp16, 65520.0), 0x7C00u);
  EXPECT_EQ(encode(Format::fp16, -65520.0, {Rounding::nearest_even, false, true}), 0xFBFFu);
  EXPECT_EQ(encode(Format::fp16, std::ldexp(1.0, -25)), 0x0000u);   // tie with 0: even
  EXPECT_EQ(encode(Format::fp16, -std::ldexp(1.0, -25)), 0x8000u);  // -0
  EXPECT_EQ(encode(Format::fp16, std::ldexp(1.0, -25), {Rounding::up}), 0x0001u);
  EXPECT_EQ(encode(Format::fp16, Tailed{std::ldexp(1.0, -25), 1}), 0x0001u);  // a hair above the tie
  EXPECT_EQ(encode(Format::fp16, std::ldexp(1023.5, -24)), 0x0400u);          // rounds up to min normal
  EXPECT_EQ(encode(Format::bf16, 3.3895313892515355e38), 0x7F7Fu);            // bf16 max
  EXPECT_EQ(encode(Format::bf16, std::ldexp(1.0, -133)), 0x0001u);
  EXPECT_EQ(encode(Format::bf16, 1.0 + std::ldexp(1.0, -8)), 0x3F80u);  // tie to even
  EXPECT_EQ(encode(Format::bf16, Tailed{1.0 + std::ldexp(1.0, -8), -1}), 0x3F80u);
  EXPECT_EQ(encode(Format::bf16, Tailed{1.0 + std::ldexp(1.0, -8), 1}), 0x3F81u);
  // Power of two with a negative residual: the exact value lies in the binade below.
  EXPECT_EQ(round_to(Format::fp16, Tailed{1.0, -1}, {Rounding::down}), 1.0 - std::ldexp(1.0, -11));
  EXPECT_EQ(round_to(Format::fp16, Tailed{1.0, -1}, {Rounding::toward_zero}), 1.0 - std::ldexp(1.0, -11));
  EXPECT_EQ(round_to(Format::fp16, Tailed{1.0, -1}, {Rounding::nearest_even}), 1.0);
  EXPECT_EQ(round_to(Format::fp16, Tailed{-1.0, 1}, {Rounding::up}), -(1.0 - std::ldexp(1.0, -11)));
}

// ======================= all fp32 patterns to fp16 and bf16 =======================

// Independent bf16 RNE on the fp32 bit pattern: add 0x7FFF plus the lowest kept bit, then truncate.
std::uint32_t bf16_rne_bits(std::uint32_t u) { return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16; }

bool is_nan_f32(std::uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

void check_fp32_pattern(std::uint32_t u, Failures& fails) {
  const float x = std::bit_cast<float>(u);
  fails.checked += 2;
  const std::uint32_t got16 = encode(Format::fp16, static_cast<double>(x));
  const std::uint32_t got_bf = encode(Format::bf16, static_cast<double>(x));
  if (is_nan_f32(u)) {
    if ((got16 & 0x7C00u) != 0x7C00u || (got16 & 0x3FFu) == 0)
      fails.add(hexbits(u) + ": fp16 of NaN = " + hexbits(got16));
    if ((got_bf & 0x7F80u) != 0x7F80u || (got_bf & 0x7Fu) == 0)
      fails.add(hexbits(u) + ": bf16 of NaN = " + hexbits(got_bf));
    return;
  }
  const std::uint32_t want16 = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
  if (got16 != want16)
    fails.add("fp32 " + hexbits(u) + " -> fp16: encode=" + hexbits(got16) + " (_Float16)=" + hexbits(want16));
  const std::uint32_t want_bf = bf16_rne_bits(u);
  if (got_bf != want_bf)
    fails.add("fp32 " + hexbits(u) + " -> bf16: encode=" + hexbits(got_bf) + " formula=" + hexbits(want_bf));
}

// Patterns [begin, end) with a stride, split across threads.
Failures check_fp32_patterns(std::uint64_t begin, std::uint64_t end, std::uint64_t stride) {
  const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  std::vector<Failures> part(nt);
  std::vector<std::thread> threads;
  const std::uint64_t n = (end - begin + stride - 1) / stride;
  for (unsigned t = 0; t < nt; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t k = n * t / nt; k < n * (t + 1) / nt; ++k)
        check_fp32_pattern(static_cast<std::uint32_t>(begin + k * stride), part[t]);
    });
  }
  for (auto& th : threads) th.join();
  Failures all;
  for (const auto& p : part) all.merge(p);
  return all;
}

TEST(Fp32ToHalf, StrideSampleAndAllNearTies) {
  // Default run: every 1021st pattern (random offset), plus every fp32 pattern within ±3 of each
  // fp16 and bf16 midpoint and of each fp16/bf16 value.
  const std::uint64_t seed = test_seed();
  Failures fails = check_fp32_patterns(seed % 1021, std::uint64_t{1} << 32, 1021);
  fails.set_seed(seed);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const double v16 = fp16_by_compiler(h);
    if (std::isfinite(v16)) {
      const std::uint32_t c = std::bit_cast<std::uint32_t>(static_cast<float>(v16));
      const std::uint32_t mid = c + 0x1000u;  // halfway to the next fp16 (a 13-bit gap for normals)
      for (int d = -3; d <= 3; ++d) {
        check_fp32_pattern(c + static_cast<std::uint32_t>(d), fails);
        if ((h & 0x7C00u) != 0) check_fp32_pattern(mid + static_cast<std::uint32_t>(d), fails);
      }
    }
    const std::uint32_t cb = h << 16;
    for (int d = -3; d <= 3; ++d) {
      check_fp32_pattern(cb + static_cast<std::uint32_t>(d), fails);
      check_fp32_pattern(cb + 0x8000u + static_cast<std::uint32_t>(d), fails);
    }
  }
  fails.expect_none("fp32 -> fp16/bf16 sample");
}

TEST(Fp32ToHalf, SlowAllFloat32Patterns) {
  Failures fails = check_fp32_patterns(0, std::uint64_t{1} << 32, 1);
  fails.expect_none("fp32 -> fp16/bf16, all 2^32 patterns");
}

}  // namespace
}  // namespace kvconf
