// Unit tests of the oracle's row kernels (reference/src/oracle_kernels.hpp): the one-pass input check against the
// element-by-element one, the fused decode path's convert-and-check, and the exact integer and condition kernels
// against plain int128 / the key-by-key loop they replace.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/numerics/format.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/oracle_detail.hpp"
#include "oracle_kernels.hpp"

namespace {

using kvconf::Format;
namespace det = kvconf::ref::detail;
using det::i128;

// n values of f: normal-ish values over several binades, zeros, subnormals of f and its largest finite value.
std::vector<double> values(Format f, std::size_t n, std::mt19937_64& g, int spread) {
  const kvconf::FormatInfo& fi = kvconf::info(f);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> x(n);
  for (auto& v : x) {
    const unsigned r = static_cast<unsigned>(g() % 16);
    if (r == 0)
      v = 0.0;
    else if (r == 1)
      v = fi.min_subnormal * static_cast<double>(1 + g() % 7) * (g() % 2 ? 1 : -1);
    else if (r == 2 && spread > 8)
      v = fi.max_finite * (g() % 2 ? 1 : -1);
    else
      v = kvconf::round_to(f, std::ldexp(nd(g), static_cast<int>(g() % static_cast<unsigned>(spread + 1)) - spread / 2));
    if (!std::isfinite(v)) v = 0.0;
  }
  return x;
}

// One value that f cannot hold: NaN, ±inf, a neighbour with too many bits, one past max_finite, a tiny double,
// half a subnormal too many, and a value with p + 1 significant bits on f's grid (only the bit count rejects it).
double bad_value(Format f, double near, std::mt19937_64& g) {
  const kvconf::FormatInfo& fi = kvconf::info(f);
  switch (g() % 7) {
    case 6:
      return std::ldexp(1.0 + std::ldexp(1.0, -fi.p), 1 + static_cast<int>(g() % 4)) * (g() % 2 ? 1 : -1);
    case 0:
      return std::nan("");
    case 1:
      return g() % 2 ? HUGE_VAL : -HUGE_VAL;
    case 2:
      return std::nextafter(near == 0.0 ? 1.0 : near, HUGE_VAL);
    case 3:
      return fi.max_finite * (1.0 + std::ldexp(1.0, 1 - fi.p));
    case 4:
      return 0x1p-1060;
    default:
      return fi.min_subnormal * 1.5;
  }
}

bool all_representable(const std::vector<double>& x, Format f) {
  for (double v : x)
    if (!std::isfinite(v) || !kvconf::representable(f, v)) return false;
  return true;
}

TEST(OracleKernels, FastCheckAgreesWithTheElementByElementCheck) {
  std::mt19937_64 g(31);
  const Format formats[] = {Format::fp8_e4m3, Format::fp8_e5m2, Format::bf16, Format::fp16, Format::fp32};
  int decided = 0;
  for (int it = 0; it < 3000; ++it) {
    const Format f = formats[g() % 5];
    const int spread = static_cast<int>(g() % 40);
    std::vector<double> x = values(f, 1 + g() % 300, g, spread);
    if (g() % 2 == 0) {
      const std::size_t i = g() % x.size();
      x[i] = bad_value(f, x[i], g);
    }
    const std::string id = "it=" + std::to_string(it) + " " + std::string(kvconf::name(f));
    det::Range fast;
    const bool ok = det::fast_check_values(x, f, &fast);
    if (!all_representable(x, f)) {
      EXPECT_FALSE(ok) << id << ": accepted a value " << kvconf::name(f) << " cannot hold";
      EXPECT_THROW(det::check_values("t", "x", x, f), std::invalid_argument) << id;
      continue;
    }
    const det::Range want = det::range_of(x);
    const det::Range got = det::check_values("t", "x", x, f);
    EXPECT_EQ(got.lo, want.lo) << id;
    EXPECT_EQ(got.hi, want.hi) << id;
    // fp16 and fp8 fit one fixed point whole: the one-pass test decides every buffer of their values.
    if (f == Format::fp16 || f == Format::fp8_e4m3 || f == Format::fp8_e5m2) {
      EXPECT_TRUE(ok) << id;
    }
    if (!ok) continue;
    ++decided;
    EXPECT_EQ(fast.lo, want.lo) << id;
    EXPECT_EQ(fast.hi, want.hi) << id;
  }
  EXPECT_GT(decided, 600);  // fp16 and fp8 buffers always, bf16 and fp32 when one fixed point holds them
}

TEST(OracleKernels, ConvertCheckAcceptsExactlyRepresentableValuesWithInt32Integers) {
  std::mt19937_64 g(32);
  const Format formats[] = {Format::fp8_e4m3, Format::fp8_e5m2, Format::fp16};
  int accepted = 0;
  for (int it = 0; it < 3000; ++it) {
    const Format f = formats[g() % 3];
    const int L = det::fixed_point_lsb(f);
    std::vector<double> x = values(f, 1 + g() % 300, g, static_cast<int>(g() % 12));
    if (g() % 4 == 0) x[g() % x.size()] = std::ldexp(g() % 2 ? 1.0 : -1.0, 31 + L);  // ±2^31 at scale 2^-L
    if (g() % 3 == 0) {
      const std::size_t i = g() % x.size();
      x[i] = bad_value(f, x[i], g);
    }
    bool want = all_representable(x, f);
    std::uint64_t max_abs = 0;
    for (double v : x) {
      const double y = std::ldexp(v, -L);
      if (!(y >= -0x1p31 && y < 0x1p31)) want = false;
      if (std::isfinite(y) && std::fabs(y) < 0x1p62) max_abs = std::max(max_abs, static_cast<std::uint64_t>(std::fabs(y)));
    }
    // In pieces of random length, as rows: the vector loops and their scalar tails.
    std::vector<std::int64_t> dst(x.size()), q(x.size()), qa(x.size());
    for (std::size_t t = 0; t < x.size(); ++t) {
      q[t] = static_cast<std::int64_t>(g() % (std::uint64_t{1} << 24)) - (std::int64_t{1} << 23);
      qa[t] = q[t] < 0 ? -q[t] : q[t];
    }
    det::ConvertCheck a(f), b(f);
    i128 D = 0, A = 0;
    for (std::size_t s = 0; s < x.size();) {
      const std::size_t n = std::min<std::size_t>(x.size() - s, 1 + g() % 11);
      a.to_int(x.data() + s, n, dst.data() + s);
      std::int64_t d = 0, aa = 0;
      b.dot_i32(q.data() + s, qa.data() + s, x.data() + s, n, &d, &aa);
      D += d;
      A += aa;
      s += n;
    }
    int bits_a = -1, bits_b = -1;
    const std::string id = "it=" + std::to_string(it) + " " + std::string(kvconf::name(f));
    ASSERT_EQ(a.finish(&bits_a), want) << id;
    ASSERT_EQ(b.finish(&bits_b), want) << id;
    if (!want) continue;
    ++accepted;
    EXPECT_EQ(bits_a, static_cast<int>(std::bit_width(max_abs))) << id;
    EXPECT_EQ(bits_b, bits_a) << id;
    i128 wd = 0, wa = 0;
    for (std::size_t t = 0; t < x.size(); ++t) {
      ASSERT_EQ(static_cast<double>(dst[t]), std::ldexp(x[t], -L)) << id << " element " << t;
      wd += static_cast<i128>(q[t]) * dst[t];
      wa += static_cast<i128>(qa[t]) * (dst[t] < 0 ? -dst[t] : dst[t]);
    }
    EXPECT_TRUE(D == wd && A == wa) << id;
  }
  EXPECT_GT(accepted, 500);
}

TEST(OracleKernels, IntegerKernelsAreExact) {
  std::mt19937_64 g(33);
  for (int it = 0; it < 400; ++it) {
    const std::size_t m = 1 + g() % (it % 10 == 0 ? det::kEvChunk : 70), dv = 1 + g() % 40;
    const bool fits32 = g() % 4 != 0;
    const int vbits = 1 + static_cast<int>(g() % 32);  // int32 values below 2^vbits
    std::vector<std::uint64_t> E(m);
    for (auto& e : E) {
      const unsigned r = static_cast<unsigned>(g() % 5);
      e = r == 0 ? 0 : r == 1 ? (std::uint64_t{1} << 62) : r == 2 ? (std::uint64_t{1} << 63) - 1 : g() >> (1 + g() % 60);
    }
    std::vector<std::vector<std::int64_t>> V(m, std::vector<std::int64_t>(dv));
    std::vector<const std::int64_t*> rows(m);
    for (std::size_t t = 0; t < m; ++t) {
      for (auto& v : V[t]) {
        const unsigned r = static_cast<unsigned>(g() % 8);
        // int32 values below 2^vbits in magnitude: [-(2^vbits − 1), 2^vbits − 1], and -2^31 when vbits = 32.
        const std::int64_t top = std::min<std::int64_t>((std::int64_t{1} << vbits) - 1, INT32_MAX);
        v = fits32 ? (r == 0 ? (vbits == 32 ? INT32_MIN : -top)
                      : r == 1 ? top
                               : static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(2 * top + 1)) - top)
                   : static_cast<std::int64_t>(g() >> 2) * (g() % 2 ? 1 : -1) / static_cast<std::int64_t>(m);
      }
      rows[t] = V[t].data();
    }
    std::vector<i128> N(dv, 7), wantN(dv, 7);
    std::vector<std::int64_t> AV(dv, 3), wantAV(dv, 3);
    det::accumulate_ev(E.data(), rows.data(), m, dv, fits32, N.data(), fits32 ? AV.data() : nullptr);
    for (std::size_t t = 0; t < m; ++t)
      for (std::size_t c = 0; c < dv; ++c) {
        wantN[c] += static_cast<i128>(E[t]) * V[t][c];
        wantAV[c] += V[t][c] < 0 ? -V[t][c] : V[t][c];
      }
    for (std::size_t c = 0; c < dv; ++c) {
      ASSERT_TRUE(N[c] == wantN[c]) << "it=" << it << " column " << c << " m=" << m << " vbits=" << vbits;
      if (fits32) {
        ASSERT_EQ(AV[c], wantAV[c]) << "it=" << it << " column " << c;
      }
    }
    // dot_i32 and its converting form on the first row (values below 2^31, sums within int64).
    std::vector<std::int64_t> q(dv), qa(dv), k(dv);
    std::vector<double> kd(dv);
    i128 wd = 0, wa = 0;
    for (std::size_t t = 0; t < dv; ++t) {
      q[t] = static_cast<std::int32_t>(g()) / 64;
      qa[t] = q[t] < 0 ? -q[t] : q[t];
      k[t] = static_cast<std::int32_t>(g()) / 64;
      kd[t] = std::ldexp(static_cast<double>(k[t]), -20);
      wd += static_cast<i128>(q[t]) * k[t];
      wa += static_cast<i128>(qa[t]) * (k[t] < 0 ? -k[t] : k[t]);
    }
    std::int64_t d = 0, a = 0, d2 = 0, a2 = 0;
    det::dot_i32(q.data(), qa.data(), k.data(), dv, &d, &a);
    det::dot_i32_from_double(q.data(), qa.data(), kd.data(), 0x1p20, dv, &d2, &a2);
    EXPECT_TRUE(d == wd && a == wa && d2 == wd && a2 == wa) << "it=" << it;
  }
}

TEST(OracleKernels, ConditionSumsMatchTheKeyByKeyLoop) {
  std::mt19937_64 g(34);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (int it = 0; it < 300; ++it) {
    const std::size_t m = g() % 12, dv = 1 + g() % 21;
    std::vector<double> p(m), o(dv);
    std::vector<std::vector<double>> v(m, std::vector<double>(dv));
    std::vector<const double*> rows(m);
    for (std::size_t t = 0; t < m; ++t) {
      p[t] = std::fabs(nd(g));
      for (auto& x : v[t]) x = nd(g) * 100;
      rows[t] = v[t].data();
    }
    for (auto& x : o) x = nd(g);
    std::vector<double> A(dv, 0.0), B(dv, 0.0), wantA(dv, 0.0), wantB(dv, 0.0);
    det::condition_sums(p.data(), rows.data(), m, dv, o.data(), A.data(), B.data());
    for (std::size_t t = 0; t < m; ++t)
      for (std::size_t c = 0; c < dv; ++c) {
        wantA[c] += p[t] * std::fabs(v[t][c]);
        wantB[c] += p[t] * std::fabs(v[t][c] - o[c]);
      }
    for (std::size_t c = 0; c < dv; ++c) {
      ASSERT_EQ(std::bit_cast<std::uint64_t>(A[c]), std::bit_cast<std::uint64_t>(wantA[c])) << "it=" << it;
      ASSERT_EQ(std::bit_cast<std::uint64_t>(B[c]), std::bit_cast<std::uint64_t>(wantB[c])) << "it=" << it;
    }
  }
}

}  // namespace
