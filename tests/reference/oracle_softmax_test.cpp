// Unit tests of kvconf::ref::softmax: closed forms, masking, tiny probabilities, agreement with a
// straightforward Boost mpfr_float softmax.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_naive.hpp"

namespace {

using kvconf::Format;
namespace ref = kvconf::ref;

ref::OracleOptions out_opts(Format out, kvconf::Rounding mode = kvconf::Rounding::nearest_even) {
  ref::OracleOptions o;
  o.out = out;
  o.round.mode = mode;
  return o;
}

TEST(OracleSoftmax, EqualScoresGiveOneOverN) {
  for (std::size_t n : {1u, 3u, 4u, 10u}) {
    const std::vector<double> s(n, 2.5);
    for (Format out : {Format::fp16, Format::fp32, Format::fp64}) {
      const auto r = ref::softmax(s, Format::fp16, out_opts(out));
      ref::Mpfr q(300);
      mpfr_set_ui(q.get(), 1, MPFR_RNDN);
      mpfr_div_ui(q.get(), q.get(), static_cast<unsigned long>(n), MPFR_RNDN);
      for (double p : r.p) EXPECT_EQ(p, ref::round_mpfr(out, q.get())) << "n=" << n;
      EXPECT_EQ(r.n_visible, n);
      EXPECT_EQ(r.max_score, 2.5);
    }
  }
}

TEST(OracleSoftmax, MaskedEntriesAreZeroAndAllMaskedIsZero) {
  const std::vector<double> s{1.0, -HUGE_VAL, 1.0, -HUGE_VAL};
  const auto r = ref::softmax(s, Format::fp16, out_opts(Format::fp32));
  EXPECT_EQ(r.p[0], 0.5);
  EXPECT_EQ(r.p[1], 0.0);
  EXPECT_EQ(r.p[2], 0.5);
  EXPECT_EQ(r.n_visible, 2u);
  const auto z = ref::softmax(std::vector<double>(3, -HUGE_VAL), Format::fp16, out_opts(Format::fp32));
  EXPECT_EQ(z.n_visible, 0u);
  for (double p : z.p) EXPECT_EQ(p, 0.0);
}

TEST(OracleSoftmax, MatchesNaiveBoost) {
  std::mt19937_64 g(5);
  std::normal_distribution<double> nd(0.0, 3.0);
  for (Format in : {Format::fp16, Format::bf16, Format::fp32}) {
    std::vector<double> s(200);
    for (auto& x : s) x = kvconf::round_to(in, nd(g));
    s[17] = -HUGE_VAL;
    for (Format out : {Format::fp16, Format::bf16, Format::fp32, Format::fp64})
      for (kvconf::Rounding m : {kvconf::Rounding::nearest_even, kvconf::Rounding::up}) {
        const auto r = ref::softmax(s, in, out_opts(out, m));
        kvconf::RoundOptions ro;
        ro.mode = m;
        const auto nv = ref::naive::softmax(s, out, ro, 400);
        for (std::size_t j = 0; j < s.size(); ++j) ASSERT_EQ(r.p[j], nv[j]) << "j=" << j << " " << kvconf::name(out);
      }
  }
}

TEST(OracleSoftmax, TinyProbabilitiesAreCertified) {
  // p ≈ e^-700 (fp64 subnormal range) and e^-2000 (below every format: rounds to 0, or up to the
  // smallest subnormal under round-up).
  const std::vector<double> s{0.0, -700.0, -2000.0};
  const auto rn = ref::softmax(s, Format::fp64, out_opts(Format::fp64));
  EXPECT_EQ(rn.p[1], ref::naive::softmax(s, Format::fp64, {}, 300)[1]);
  EXPECT_GT(rn.p[1], 0.0);
  EXPECT_EQ(rn.p[2], 0.0);
  const auto ru = ref::softmax(s, Format::fp64, out_opts(Format::fp64, kvconf::Rounding::up));
  EXPECT_EQ(ru.p[2], 0x1p-1074);
  const auto h = ref::softmax(s, Format::fp64, out_opts(Format::fp16, kvconf::Rounding::up));
  EXPECT_EQ(h.p[2], 0x1p-24);
  EXPECT_EQ(h.p[0], 1.0);
}

TEST(OracleSoftmax, SlowRandomizedAgreement) {
  // Random lengths, formats, spreads (up to ±2000: dropped terms), masks, output formats and modes.
  std::mt19937_64 g(77);
  const Format ins[] = {Format::fp16, Format::bf16, Format::fp32, Format::fp64};
  const Format outs[] = {Format::fp16, Format::bf16, Format::fp32, Format::fp64};
  for (int it = 0; it < 400; ++it) {
    const Format in = ins[g() % 4], out = outs[g() % 4];
    const auto mode = static_cast<kvconf::Rounding>(g() % 4);
    std::normal_distribution<double> nd(0.0, std::ldexp(1.0, static_cast<int>(g() % 12)));
    std::vector<double> s(1 + g() % 64);
    for (auto& x : s) x = (g() % 8 == 0) ? -HUGE_VAL : kvconf::round_to(in, nd(g));
    const auto r = ref::softmax(s, in, out_opts(out, mode));
    kvconf::RoundOptions ro;
    ro.mode = mode;
    bool all_equal = true;
    double first = -HUGE_VAL, lo = HUGE_VAL, hi = -HUGE_VAL;
    for (double x : s)
      if (std::isfinite(x)) {
        if (first == -HUGE_VAL) first = x;
        all_equal = all_equal && x == first;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
    if (all_equal) continue;  // p = 1/n exactly: covered by EqualScoresGiveOneOverN (naive cannot round it)
    // Precision at which the naive sums resolve every term (e^-spread) against S >= 1.
    const auto bits = static_cast<unsigned>(300 + 1.5 * (hi - lo));
    auto nv = ref::naive::softmax(s, out, ro, 600);
    if (nv != r.p) nv = ref::naive::softmax(s, out, ro, std::max(bits, 600u));
    for (std::size_t j = 0; j < s.size(); ++j) ASSERT_EQ(r.p[j], nv[j]) << "it=" << it << " j=" << j;
  }
}

TEST(OracleSoftmax, RejectsNaNAndPositiveInfinity) {
  try {
    ref::softmax(std::vector<double>{0.0, std::nan("")}, Format::fp16);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("scores[1] = nan is NaN"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ref::softmax(std::vector<double>{HUGE_VAL}, Format::fp16), std::invalid_argument);
  EXPECT_THROW(ref::softmax(std::vector<double>{0.1}, Format::fp16), std::invalid_argument);
}

}  // namespace
