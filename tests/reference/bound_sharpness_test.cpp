// Sharpness of the dot-product bound families: for each, an input construction whose real error against the MPFR
// oracle reaches a stated fraction of the a-priori bound, so a bound that grows looser than that (a rounding count
// doubled, γ taken at 2n, a term charged twice) fails here even though every conformance check still passes.
//
// The construction (Higham, ASNA §4.2's worst case for recursive summation): a first term 1, then n − 1 products
// v just under half an ulp of 1 in the accumulator, so every addition rounds back down to 1 and loses almost u at a
// partial sum of magnitude ≈ Σ|x_i y_i|: the error is (n − 1)·v ≈ (n − 1)·u·Σ|x_i y_i|, which is the bound's
// first-order term exactly. What separates the two is the second order only: γ_{n−1}'s 1/(1 − (n − 1)u), the growth
// of Σ|x_i y_i| by (n − 1)v, v's distance below u, and kSafety. Each test states the fraction those leave.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/norm.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf {
namespace {

struct Sharpness {
  double error = 0.0, bound = 0.0;
  double ratio() const { return error / bound; }
};

// x = [1, a, a, ...], y = [1, b, b, ...] (n terms), plus an optional second term t (y = 1) placed second; the kernel
// arithmetic is `evaluate` = kvconf::dot in the Sequential order (one order every family here must cover).
Sharpness measure(const AccumSpec& spec, const Order& bound_order, std::size_t n, double a, double b, double t = 0) {
  std::vector<double> x = {1.0}, y = {1.0};
  if (t != 0.0) x.push_back(t), y.push_back(1.0);
  while (x.size() < n) x.push_back(a), y.push_back(b);
  const double computed = dot(spec, Sequential{}, x, y);
  ref::OracleOptions o;
  o.out = spec.out;
  const ref::DotResult exact = ref::dot(x, y, spec.in, o);
  Sharpness s;
  s.error = std::fabs(computed - exact.approx);  // approx is exact here: the sum has < 53 significant bits
  s.bound = ref::dot_error_bound(spec, bound_order, n, exact.abs_sum, 1.0);
  ::testing::Test::RecordProperty("error", std::to_string(s.error));
  ::testing::Test::RecordProperty("bound", std::to_string(s.bound));
  ::testing::Test::RecordProperty("ratio", std::to_string(s.ratio()));
  std::printf("error %.9g bound %.9g ratio %.6f\n", s.error, s.bound, s.ratio());
  return s;
}

// fp32 accumulation, sequential chain (cpu.gemm.g1.f32, the fp32 reference profile's GEMM): v = 2^-24·(1 − 2^-10),
// n = 1024. Second-order slack: (n − 1)u ≈ 6·10^-5, 2^-10 ≈ 10^-3, kSafety 10^-6: at least 0.99 of the bound.
TEST(BoundSharpness, SequentialFp32ChainReaches99Percent) {
  const AccumSpec spec{Format::fp32, Format::fp32, Format::fp32, false};
  const Sharpness s = measure(spec, Sequential{}, 1024, 1.0, 0x1p-24 * (1.0 - 0x1p-10));
  EXPECT_GT(s.error, 0.0);
  EXPECT_LE(s.error, s.bound) << "the bound does not hold";
  EXPECT_GE(s.ratio(), 0.99) << "error " << s.error << " bound " << s.bound;
}

// fp16 accumulation (the acc16 GEMMs): v = 2^-11·(1 − 2^-5), n = 32. Slack: (n − 1)u = 31·2^-11 ≈ 1.5% in γ and
// 1.5% in Σ|x_i y_i|, 2^-5 ≈ 3% in v: at least 0.9 of the bound.
TEST(BoundSharpness, SequentialFp16ChainReaches90Percent) {
  const AccumSpec spec{Format::fp16, Format::fp16, Format::fp16, false};
  const Sharpness s = measure(spec, Sequential{}, 32, 1.0, 0x1p-11 * (1.0 - 0x1p-5));
  EXPECT_GT(s.error, 0.0);
  EXPECT_LE(s.error, s.bound) << "the bound does not hold";
  EXPECT_GE(s.ratio(), 0.9) << "error " << s.error << " bound " << s.bound;
}

// The black-box GEMM (kernels::black_box_gemm_path: fp16 in and out, fp32 any order; torch.gemm.linear.f16 and
// plugins): AnyOrder charges a term the sequential chain's n − 1 roundings, so the chain above is its worst order
// too. Products a·b = 2^-24·(1 − 2^-10) (a = 2^-12, b = 2^-12·(1 − 2^-10), both fp16), n = 1024, and a second term
// t = 2^-11·(1 − 2^-9) that the fp32 sum keeps exactly and the fp16 output rounding drops: the output rounding then
// loses almost u16 as well. Slack: 2^-9 in t, (n − 1)u32 against u16 (≈ 3%) in Σ|x_i y_i|: at least 0.95.
TEST(BoundSharpness, BlackBoxGemmReaches95Percent) {
  const AccumSpec spec{Format::fp16, Format::fp32, Format::fp16, false};
  const Sharpness s = measure(spec, AnyOrder{}, 1024, 0x1p-12, 0x1p-12 * (1.0 - 0x1p-10), 0x1p-11 * (1.0 - 0x1p-9));
  EXPECT_GT(s.error, 0.0);
  EXPECT_LE(s.error, s.bound) << "the bound does not hold";
  EXPECT_GE(s.ratio(), 0.95) << "error " << s.error << " bound " << s.bound;
}

// The RMSNorm family (reference/norm.hpp, Gemma's (1 + w) path of cpu.norm.r1.f16: one fp16 rounding of the output):
// x alternates 1 + 2^-10 and 1 − 2^-10 (Σx²/d = 1 + 2^-20, so ρ = 1 − 2^-21 to first order) and 1 + w = 1 − 2^-11,
// so y = (1 + 2^-10)(1 − 2^-11)ρ = 1 + 2^-11 − 2^-20 − ...: just under the midpoint between 1 and the next fp16, and
// the kernel's y rounds down to 1, losing 2^-11·(1 − 2^-9 − ...) ≈ u16·|y|, which is the bound's leading term. The
// bound's other terms are fp32 roundings and the rsqrt error, a few 2^-24 against 2^-11 (< 1%): at least 0.95.
TEST(BoundSharpness, RmsNormOutputRoundingReaches95Percent) {
  const kernels::Registry reg = kernels::cpu_registry();
  const kernels::NormKernel* k = reg.find_norm("cpu.norm.r1.f16");
  ASSERT_NE(k, nullptr);
  const kernels::NormShape shape{1, 64};
  ASSERT_FALSE(k->supports(shape).has_value());
  kernels::NormParams params;
  params.eps = 0.0f;
  params.one_plus_weight = true;
  std::vector<float> x(shape.d), w(shape.d, -0x1p-11f), y(shape.d);
  for (std::size_t i = 0; i < shape.d; ++i) x[i] = i % 2 == 0 ? 1.0f + 0x1p-10f : 1.0f - 0x1p-10f;
  k->run(shape, params, x, w, y);
  const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end());
  ref::OracleOptions o;
  o.out = Format::fp16;
  const ref::RmsNormResult exact = ref::rms_norm(xd, wd, 1, shape.d, 0.0, true, Format::fp16, o);
  const kernels::NormPath path = k->path(shape);
  ref::RmsNormErrorInputs in;
  in.d = shape.d;
  in.sum_sq = exact.sum_sq[0];
  in.eps = 0.0;
  in.sum_terms = ref::dot_error_terms(path.spec, path.order, shape.d, 1.0 + 0x1p-10);
  in.rsqrt_rel_error = path.rsqrt_rel_error;
  in.one_plus_weight = true;
  in.out = Format::fp16;
  const ref::RmsNormErrorTerms terms = ref::rms_norm_error_terms(in);
  Sharpness s;
  s.error = std::fabs(static_cast<double>(y[0]) - exact.approx[0]);
  s.bound = terms.at(std::fabs(exact.approx[0]) * (1.0 + 0x1p-51), 1.0 - 0x1p-11);
  std::printf("error %.9g bound %.9g ratio %.6f\n", s.error, s.bound, s.ratio());
  ::testing::Test::RecordProperty("ratio", std::to_string(s.ratio()));
  EXPECT_EQ(y[0], 1.0f) << "the construction must round down to 1";
  EXPECT_LE(s.error, s.bound) << "the bound does not hold";
  EXPECT_GE(s.ratio(), 0.95) << "error " << s.error << " bound " << s.bound;
}

}  // namespace
}  // namespace kvconf
