// Unit tests of kvconf::ref::dot and kvconf::ref::project: exactness against GMP rationals (mpq),
// the int128 and MPFR paths agreeing, and projection rows independent of the number of rows m.
#include <gmp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/oracle.hpp"
#include "test_support.hpp"

namespace {

using kvconf::test::randn;

using kvconf::Format;
namespace ref = kvconf::ref;

// Σ x_i y_i as an exact GMP rational, and its correct rounding to f via a 6000-bit MPFR value
// (exact: the sum is a dyadic rational with fewer significant bits).
struct Exact {
  mpq_t s, a;
  Exact(const std::vector<double>& x, const std::vector<double>& y) {
    mpq_inits(s, a, nullptr);
    mpq_t p, qx, qy;
    mpq_inits(p, qx, qy, nullptr);
    for (std::size_t i = 0; i < x.size(); ++i) {
      mpq_set_d(qx, x[i]);
      mpq_set_d(qy, y[i]);
      mpq_mul(p, qx, qy);
      mpq_add(s, s, p);
      mpq_abs(p, p);
      mpq_add(a, a, p);
    }
    mpq_clears(p, qx, qy, nullptr);
  }
  ~Exact() { mpq_clears(s, a, nullptr); }
  double rounded(Format f, kvconf::RoundOptions o = {}) const {
    ref::Mpfr m(6000);
    EXPECT_EQ(mpfr_set_q(m.get(), s, MPFR_RNDN), 0);
    return ref::round_mpfr(f, m.get(), o);
  }
  double abs_up() const {
    ref::Mpfr m(6000);
    mpfr_set_q(m.get(), a, MPFR_RNDU);
    return mpfr_get_d(m.get(), MPFR_RNDU);
  }
};

void check_dot(const std::vector<double>& x, const std::vector<double>& y, Format in, const std::string& what) {
  const Exact ex(x, y);
  for (bool fast : {true, false})
    for (Format out : {Format::fp16, Format::bf16, Format::fp32, Format::fp64}) {
      ref::OracleOptions o;
      o.out = out;
      o.fast_paths = fast;
      const auto r = ref::dot(x, y, in, o);
      EXPECT_EQ(r.value, ex.rounded(out)) << what << " out=" << kvconf::name(out) << " fast=" << fast;
      mpq_t e;
      mpq_init(e);
      mpfr_get_q(e, r.exact.get());
      EXPECT_EQ(mpq_cmp(e, ex.s), 0) << what << ": exact value differs";
      mpq_clear(e);
      EXPECT_EQ(r.abs_sum, ex.abs_up()) << what;
      EXPECT_EQ(r.approx, ex.rounded(Format::fp64)) << what;
    }
}

TEST(OracleDot, ExactFp16MatchesGmp) {
  for (std::size_t n : {1u, 7u, 128u, 4096u})
    check_dot(randn(n, Format::fp16, n, 8.0), randn(n, Format::fp16, n + 1, 8.0), Format::fp16,
              "fp16 n=" + std::to_string(n));
  // extremes: max finite and subnormals together
  check_dot({65504.0, 0x1p-24, -65504.0, 0x1p-14}, {65504.0, 0x1p-24, 65504.0, -3.0}, Format::fp16, "fp16 extremes");
}

TEST(OracleDot, ExactBf16MatchesGmp) {
  check_dot(randn(300, Format::bf16, 5), randn(300, Format::bf16, 6), Format::bf16, "bf16");
  // a range too wide for int128: 2^100 and 2^-100 together
  std::vector<double> x = randn(50, Format::bf16, 7), y = randn(50, Format::bf16, 8);
  x[3] = 0x1p100;
  y[4] = 0x1.2p-100;
  check_dot(x, y, Format::bf16, "bf16 wide");
}

TEST(OracleDot, ExactFp32AndFp64MatchGmp) {
  check_dot(randn(200, Format::fp32, 9), randn(200, Format::fp32, 10), Format::fp32, "fp32");
  std::vector<double> x = randn(64, Format::fp32, 11), y = randn(64, Format::fp32, 12);
  x[0] = 0x1p120;
  y[1] = 0x1p-140;
  check_dot(x, y, Format::fp32, "fp32 wide");
  check_dot(randn(64, Format::fp64, 13), randn(64, Format::fp64, 14), Format::fp64, "fp64");
  check_dot({1e300, 1.0, -1e300}, {1e10, 1e-300, 1e10}, Format::fp64, "fp64 cancellation");
}

TEST(OracleDot, EmptyAndCancellingSumsAreZero) {
  EXPECT_EQ(ref::dot({}, {}, Format::fp16).value, 0.0);
  const auto r = ref::dot(std::vector<double>{3.0, -1.5}, std::vector<double>{1.0, 2.0}, Format::fp16);
  EXPECT_EQ(r.value, 0.0);
  EXPECT_FALSE(std::signbit(r.value));
  EXPECT_EQ(r.abs_sum, 6.0);
}

TEST(OracleDot, RejectsBadInputs) {
  const std::vector<double> a{1.0, 2.0}, b{1.0};
  EXPECT_THROW(ref::dot(a, b, Format::fp16), std::invalid_argument);
  try {
    ref::dot(std::vector<double>{1.0, 1.0 / 3.0}, std::vector<double>{1.0, 1.0}, Format::bf16);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("x[1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not representable in bf16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ref::dot(std::vector<double>{std::nan("")}, std::vector<double>{1.0}, Format::fp32),
               std::invalid_argument);
}

TEST(OracleProjection, RowsDoNotDependOnM) {
  const std::size_t m = 9, n_in = 64, n_out = 12;
  const auto x = randn(m * n_in, Format::fp16, 21), w = randn(n_out * n_in, Format::fp16, 22, 0.05);
  for (Format out : {Format::fp16, Format::fp32}) {
    ref::OracleOptions o;
    o.out = out;
    const auto all = ref::project(x, w, m, n_in, n_out, Format::fp16, o);
    for (std::size_t r = 0; r < m; ++r) {
      const std::vector<double> xr(x.begin() + static_cast<std::ptrdiff_t>(r * n_in),
                                   x.begin() + static_cast<std::ptrdiff_t>((r + 1) * n_in));
      const auto one = ref::project(xr, w, 1, n_in, n_out, Format::fp16, o);  // matrix–vector
      for (std::size_t c = 0; c < n_out; ++c) {
        ASSERT_EQ(one.y[c], all.y[r * n_out + c]) << "row " << r << " col " << c;
        ASSERT_EQ(one.abs_sum[c], all.abs_sum[r * n_out + c]);
      }
    }
  }
}

TEST(OracleProjection, MatchesDotAndMpfrPath) {
  const std::size_t m = 3, n_in = 40, n_out = 5;
  for (Format in : {Format::fp16, Format::bf16, Format::fp32, Format::fp64}) {
    const auto x = randn(m * n_in, in, 31), w = randn(n_out * n_in, in, 32);
    ref::OracleOptions o;
    o.out = Format::bf16;
    const auto fast = ref::project(x, w, m, n_in, n_out, in, o);
    o.fast_paths = false;
    const auto slow = ref::project(x, w, m, n_in, n_out, in, o);
    for (std::size_t r = 0; r < m; ++r)
      for (std::size_t c = 0; c < n_out; ++c) {
        const std::vector<double> xr(x.begin() + static_cast<std::ptrdiff_t>(r * n_in),
                                     x.begin() + static_cast<std::ptrdiff_t>((r + 1) * n_in));
        const std::vector<double> wc(w.begin() + static_cast<std::ptrdiff_t>(c * n_in),
                                     w.begin() + static_cast<std::ptrdiff_t>((c + 1) * n_in));
        const Exact ex(xr, wc);
        const std::size_t t = r * n_out + c;
        EXPECT_EQ(fast.y[t], ex.rounded(Format::bf16)) << kvconf::name(in);
        EXPECT_EQ(slow.y[t], fast.y[t]);
        EXPECT_EQ(fast.approx[t], ex.rounded(Format::fp64));
        EXPECT_EQ(slow.abs_sum[t], fast.abs_sum[t]);
        EXPECT_EQ(fast.abs_sum[t], ex.abs_up());
      }
  }
}

TEST(OracleProjection, RoundingModesAndTiesFromTheExactValue) {
  // y = 1 + 2^-11 exactly (an fp16 tie) and y = 1 + 2^-11 + 2^-24 (just above it).
  const std::vector<double> w{1.0, 0x1p-11, 0x1p-24};
  const std::vector<double> x{1.0, 1.0, 0.0, 1.0, 1.0, 1.0};  // (2, 3)
  kvconf::RoundOptions ro;
  ref::OracleOptions o;
  o.out = Format::fp16;
  auto r = ref::project(x, w, 2, 3, 1, Format::fp32, o);
  EXPECT_EQ(r.y[0], 1.0);
  EXPECT_EQ(r.y[1], 1.0 + 0x1p-10);
  o.round.mode = kvconf::Rounding::up;
  r = ref::project(x, w, 2, 3, 1, Format::fp32, o);
  EXPECT_EQ(r.y[0], 1.0 + 0x1p-10);
  o.round.mode = kvconf::Rounding::toward_zero;
  r = ref::project(x, w, 2, 3, 1, Format::fp32, o);
  EXPECT_EQ(r.y[1], 1.0);
  (void)ro;
}

TEST(OracleProjection, RejectsMismatchedShapes) {
  const std::vector<double> x(6, 1.0), w(10, 1.0);
  try {
    ref::project(x, w, 2, 3, 3, Format::fp16);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("w has 10 values, expected n_out*n_in = 9"), std::string::npos) << e.what();
  }
}

}  // namespace
