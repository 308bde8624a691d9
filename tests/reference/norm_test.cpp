// Tests of the RMSNorm oracle and bound (reference/norm.hpp): closed forms where 1/rms is an exact power
// of two, agreement with a direct Boost.Multiprecision mpfr_float (>= 200 bits) evaluation on random data,
// input validation, and the a-priori bound against an emulated kernel pipeline (numerics' correctly rounded
// ops in the HF order) over many seeds, with the measured/bound ratio reported.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/numerics/arith.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/norm.hpp"
#include "test_support.hpp"

namespace kvconf::ref {
namespace {

using namespace kvconf::test;
using mp = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<61>, boost::multiprecision::et_off>;

std::vector<double> values(Format f, std::size_t n, std::mt19937_64& rng, double mean, double sigma) {
  std::normal_distribution<double> g(mean, sigma);
  std::vector<double> v(n);
  for (auto& x : v) x = round_to(f, g(rng));
  return v;
}

// 1/rms is a power of two: W = Σx²/d + eps = 4 or 16, so y = x·w'/2 or x·w'/4, exact before the final rounding.
TEST(RmsNormOracle, ClosedFormsWithExactInverseRms) {
  std::mt19937_64 rng(test_seed());
  for (const std::size_t d : {1u, 7u, 64u, 100u}) {
    const auto w = values(Format::fp16, d, rng, 0.0, 2.0);
    for (const bool gemma : {false, true}) {
      // x ≡ 1, eps = 3: W = 4, ρ = 1/2.
      const std::vector<double> ones(d, 1.0);
      const RmsNormResult a = rms_norm(ones, w, 1, d, 3.0, gemma, Format::fp16, {Format::fp16});
      // x ≡ −2, eps = 12: W = 16, ρ = 1/4.
      const std::vector<double> twos(d, -2.0);
      const RmsNormResult b = rms_norm(twos, w, 1, d, 12.0, gemma, Format::fp16, {Format::fp16});
      for (std::size_t i = 0; i < d; ++i) {
        const double wp = gemma ? 1.0 + w[i] : w[i];  // exact in double
        EXPECT_TRUE(same(a.y[i], round_to(Format::fp16, wp / 2))) << "d=" << d << " i=" << i << " gemma=" << gemma;
        EXPECT_TRUE(same(b.y[i] + 0.0, round_to(Format::fp16, -wp / 2) + 0.0)) << "d=" << d << " i=" << i;
      }
      EXPECT_EQ(a.inv_rms[0], 0.5);
      EXPECT_EQ(b.inv_rms[0], 0.25);
      EXPECT_EQ(a.sum_sq[0], static_cast<double>(d));
      EXPECT_EQ(b.sum_sq[0], 4.0 * static_cast<double>(d));
    }
  }
  // Unequal entries, d = 2: x = [3, 4], eps = 3.5: W = 25/2 + 3.5 = 16, y = [3w/4, w].
  const std::vector<double> x{3.0, 4.0}, w{1.5, -0.375};
  const RmsNormResult r = rms_norm(x, w, 1, 2, 3.5, false, Format::fp16, {Format::fp32});
  EXPECT_EQ(r.y[0], 3.0 * 1.5 / 4);
  EXPECT_EQ(r.y[1], -0.375);
  // eps = 0 and x constant: ρ = 1/|c|, y = sign(c)·w exactly, whatever c is.
  const std::vector<double> c(5, round_to(Format::fp16, -0.3)), w5{1.0, -2.0, 0.5, 3.0, 0.0};
  const RmsNormResult z = rms_norm(c, w5, 1, 5, 0.0, false, Format::fp16, {Format::fp16});
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(z.y[i], -w5[i]) << i;
}

// Random rows against y = x·w'/sqrt(Σx²/d + eps) in 200-bit MPFR (Boost), rounded by MPFR's own rounding.
TEST(RmsNormOracle, MatchesBoostMpfrOnRandomData) {
  std::mt19937_64 rng(test_seed());
  Failures f;
  f.set_seed(test_seed());
  for (const Format in : {Format::fp16, Format::bf16, Format::fp32}) {
    for (const Format out : {Format::fp16, Format::bf16, Format::fp32}) {
      for (const bool gemma : {false, true}) {
        const std::size_t rows = 3, d = 96;
        const auto x = values(in, rows * d, rng, 0.0, 1.5);
        const auto w = values(in, d, rng, gemma ? 0.0 : 1.0, 0.3);
        const double eps = static_cast<float>(1e-5);
        const RmsNormResult r = rms_norm(x, w, rows, d, eps, gemma, in, {out});
        for (std::size_t row = 0; row < rows; ++row) {
          mp S = 0;
          for (std::size_t i = 0; i < d; ++i) S += mp(x[row * d + i]) * mp(x[row * d + i]);
          const mp rho = 1 / sqrt(S / static_cast<double>(d) + mp(eps));
          for (std::size_t i = 0; i < d; ++i) {
            const mp wp = gemma ? mp(1) + mp(w[i]) : mp(w[i]);
            const mp y = mp(x[row * d + i]) * wp * rho;
            const double expect = round_mpfr(out, y.backend().data());
            ++f.checked;
            if (!same(r.y[row * d + i] + 0.0, expect + 0.0))
              f.add(std::string(name(in)) + "->" + std::string(name(out)) + (gemma ? " gemma" : " llama") + " row " +
                    std::to_string(row) + " i " + std::to_string(i) + ": oracle " + hex(r.y[row * d + i]) + " mpfr " +
                    hex(expect));
          }
        }
      }
    }
  }
  f.expect_none("rms_norm vs Boost mpfr_float");
}

TEST(RmsNormOracle, RejectsBadInput) {
  const std::vector<double> x{1.0, 2.0, 3.0, 4.0}, w{1.0, 1.0};
  EXPECT_THROW(rms_norm(x, w, 3, 2, 1e-6, false, Format::fp16), std::invalid_argument);  // x size
  EXPECT_THROW(rms_norm(x, x, 2, 2, 1e-6, false, Format::fp16), std::invalid_argument);  // w size
  EXPECT_THROW(rms_norm(x, w, 2, 2, -1.0, false, Format::fp16), std::invalid_argument);
  EXPECT_THROW(rms_norm(x, w, 2, 2, HUGE_VAL, false, Format::fp16), std::invalid_argument);
  EXPECT_THROW(rms_norm(x, w, 0, 0, 1e-6, false, Format::fp16), std::invalid_argument);
  const std::vector<double> zero(2, 0.0);
  EXPECT_THROW(rms_norm(zero, w, 1, 2, 0.0, false, Format::fp16), std::invalid_argument);
  EXPECT_NO_THROW(rms_norm(zero, w, 1, 2, 1e-6, false, Format::fp16));
  const std::vector<double> not_fp16{1.0 + p2(-20), 1.0};
  EXPECT_THROW(rms_norm(not_fp16, w, 1, 2, 1e-6, false, Format::fp16), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------
// The bound against an emulated pipeline: Σx² by numerics::dot in a kernel order, then the HF steps with
// correctly rounded fp32 ops, rsqrt as fl32(1/sqrt(double)).

struct Pipeline {
  const char* name;
  Order order;
};

// r̂ of the row from Ŝ (computed by numerics::dot in the kernel's order).
double inv_rms(double S, std::size_t d, double eps) {
  const double f = div(Format::fp32, 1.0, static_cast<double>(d));
  const double V = mul(Format::fp32, S, f);
  const double W = add(Format::fp32, V, eps);
  return round_to(Format::fp32, 1.0 / std::sqrt(W));
}

double emulate(double x, double w, double r, bool gemma, Format out) {
  const double h = mul(Format::fp32, x, r);
  if (!gemma) return mul(out, w, round_to(out, h));
  return round_to(out, mul(Format::fp32, h, add(Format::fp32, 1.0, w)));
}

TEST(RmsNormBound, EmulatedPipelineWithinBound) {
  ThreadStrided r1;  // PyTorch: 512 threads, float4 lanes (1 row, d = 4096)
  r1.threads = 512;
  r1.vec = 4;
  r1.split_lanes = true;
  r1.tree = ThreadTree::block_first;
  ThreadStrided r1small;  // 64 threads, vt0 = 4 interleaved accumulators (d <= 128)
  r1small.threads = 64;
  r1small.interleave = 4;
  r1small.tree = ThreadTree::block_first;
  const std::vector<Pipeline> pipes{
      {"seq", Sequential{}}, {"r1", r1}, {"r1small", r1small}, {"r2", Blocked{1024, true}}};
  std::mt19937_64 rng(test_seed());
  int checked = 0;
  for (const Format fmt : {Format::fp16, Format::bf16, Format::fp32}) {
    for (const bool gemma : {false, true}) {
      double worst = 0.0;
      for (int seed = 0; seed < 12; ++seed) {
        const std::size_t d = seed % 3 == 0 ? 4096 : (seed % 3 == 1 ? 2304 : 100);
        const double scale = seed % 4 == 0 ? 1e-3 : (seed % 4 == 1 ? 30.0 : 1.0);  // tiny rows: eps matters
        const auto x = values(fmt, d, rng, 0.0, scale);
        const auto w = values(fmt, d, rng, gemma ? 0.0 : 1.0, 0.5);
        const double eps = static_cast<float>(seed % 2 ? 1e-6 : 1e-5);
        const RmsNormResult o = rms_norm(x, w, 1, d, eps, gemma, fmt, {fmt});
        AccumSpec spec = spec_of(fmt, Format::fp32, Format::fp32, false);
        for (const Pipeline& p : pipes) {
          RmsNormErrorInputs bi;
          bi.d = d;
          bi.sum_sq = o.sum_sq[0];
          bi.eps = eps;
          bi.sum_terms = dot_error_terms(spec, p.order, d);
          bi.one_plus_weight = gemma;
          bi.out = fmt;
          const RmsNormErrorTerms t = rms_norm_error_terms(bi);
          const double r = inv_rms(dot(spec, p.order, x, x), d, eps);
          for (std::size_t i = 0; i < d; ++i) {
            const double y = emulate(x[i], w[i], r, gemma, fmt);
            const double err = std::fabs(y - o.approx[i]) + p2(-52) * std::fabs(o.approx[i]);
            const double wf = gemma ? 1.0 + std::fabs(w[i]) : std::fabs(w[i]);
            const double bound = t.at(std::fabs(o.approx[i]) * (1 + p2(-52)), wf);
            ASSERT_LE(err, bound) << name(fmt) << (gemma ? " gemma " : " llama ") << p.name << " d=" << d << " i=" << i
                                  << " seed " << test_seed();
            worst = std::max(worst, err / bound);
            ++checked;
          }
        }
      }
      std::printf("[   info   ] RMSNorm %s %s: max measured/bound %.3f\n", std::string(name(fmt)).c_str(),
                  gemma ? "gemma" : "llama", worst);
      ::testing::Test::RecordProperty(
          std::string("ratio_max.rmsnorm.") + std::string(name(fmt)) + (gemma ? ".gemma" : ".llama"),
          std::to_string(worst));
    }
  }
  EXPECT_GT(checked, 0);
}

// The bound's ingredients: exact 1/d for powers of two, the rsqrt error carried at first order, vacuous when
// the variance perturbation reaches 1.
TEST(RmsNormBound, TermsFollowTheDerivation) {
  RmsNormErrorInputs in;
  in.d = 4096;
  in.sum_sq = 4096.0;
  in.eps = 0.0;
  in.out = Format::fp32;
  const RmsNormErrorTerms exact_sum = rms_norm_error_terms(in);
  // T = 2u (the roundings of Ŝ·f̂ and of + eps), K ≈ ε_r + T/2, rel ≈ K + 2u (x·r̂ and w·ĥ).
  const double u = p2(-24);
  const double first = kRsqrtViaDoubleRelError + u + 2 * u;
  EXPECT_GT(exact_sum.rel, first);
  EXPECT_LT(exact_sum.rel, first * (1 + 1e-6));
  // d = 100: 1/d is rounded (one more u, halved through the square root).
  in.d = 100;
  in.sum_sq = 100.0;
  EXPECT_GT(rms_norm_error_terms(in).rel, exact_sum.rel + u / 2 * 0.999);
  // fp16 output adds two fp16 roundings for Llama.
  in.out = Format::fp16;
  EXPECT_GT(rms_norm_error_terms(in).rel, 2 * p2(-11));
  in.sum_terms = ErrorTerms{2.0, 0.0};
  EXPECT_TRUE(std::isinf(rms_norm_error_terms(in).rel));
  EXPECT_TRUE(std::isinf(rms_norm_error_bound(in, 1.0, 1.0)));
}

}  // namespace
}  // namespace kvconf::ref
