// Unit tests of the CPU RMSNorm kernels (kernels/cpu/norm_*.cpp): every registered norm kernel equals, bit for
// bit, Σx² by numerics::dot(path.spec, path.order) followed by the HF pipeline in numerics' correctly rounded
// ops (AVX2 and scalar loops alike); R1's path follows PyTorch's launch configuration (threads per row from
// the number of rows) and R2's does not depend on the rows; outputs stay within the oracle's bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/kernels/fast_fp.hpp"
#include "norm_rows.hpp"  // kernels/cpu: the row reductions, tested on their own
#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/numerics/arith.hpp"
#include "kvconf/reference/norm.hpp"
#include "test_support.hpp"

namespace kvconf::kernels {
namespace {

using namespace kvconf::test;

// One registry for the whole test program (kernels hold no state).
const Registry& registry() {
  static const Registry r = cpu_registry();
  return r;
}

struct SimdScope {
  bool saved = simd_enabled();
  explicit SimdScope(bool on) { set_simd_enabled(on); }
  ~SimdScope() { set_simd_enabled(saved); }
};

std::vector<float> random_tensor(Format f, std::size_t n, std::mt19937_64& rng, double mean, double sigma) {
  std::normal_distribution<double> g(mean, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(round_to(f, g(rng)));
  return v;
}

// The reference: numerics::dot for Σx² on the kernel's path, then the HF steps with arith's ops.
std::vector<double> reference(const NormKernel& k, const NormShape& s, const NormParams& p, const std::vector<float>& x,
                              const std::vector<float>& w) {
  const NormPath path = k.path(s);
  const Format out = k.info.out;
  std::vector<double> y(s.rows * s.d), xr(s.d);
  const double f = div(Format::fp32, 1.0, static_cast<double>(s.d));
  for (std::size_t r = 0; r < s.rows; ++r) {
    for (std::size_t i = 0; i < s.d; ++i) xr[i] = x[r * s.d + i];
    const double S = dot(path.spec, path.order, xr, xr);
    const double W = add(Format::fp32, mul(Format::fp32, S, f), p.eps);
    const double rr = round_to(Format::fp32, 1.0 / std::sqrt(W));
    for (std::size_t i = 0; i < s.d; ++i) {
      const double h = mul(Format::fp32, xr[i], rr);
      y[r * s.d + i] = p.one_plus_weight ? round_to(out, mul(Format::fp32, h, add(Format::fp32, 1.0, w[i])))
                                         : mul(out, w[i], round_to(out, h));
    }
  }
  return y;
}

void check_norm_kernel(const NormKernel& k, bool simd) {
  SimdScope scope(simd);
  const std::uint64_t seed = test_seed() ^ std::hash<std::string>{}(k.info.name);
  std::mt19937_64 rng(seed);
  Failures fl;
  fl.set_seed(seed);
  for (std::size_t rows : {1u, 2u, 3u, 7u, 16u, 64u}) {
    for (std::size_t d : {64u, 100u, 2304u, 4096u}) {
      const NormShape s{rows, d};
      if (k.supports(s)) continue;
      for (const bool gemma : {false, true}) {
        NormParams p;
        p.eps = rows % 2 ? 1e-6f : 1e-5f;
        p.one_plus_weight = gemma;
        const auto x = random_tensor(k.info.in, rows * d, rng, 0.0, rows == 3 ? 1e-3 : 1.0);
        const auto w = random_tensor(k.info.in, d, rng, gemma ? 0.0 : 1.0, 0.5);
        std::vector<float> y(rows * d, -1.0f);
        k.run(s, p, x, w, y);
        const auto ref = reference(k, s, p, x, w);
        for (std::size_t i = 0; i < y.size(); ++i) {
          ++fl.checked;
          if (!same(static_cast<double>(y[i]), ref[i]))
            fl.add(k.info.name + (simd ? " simd" : " scalar") + " rows=" + std::to_string(rows) +
                   " d=" + std::to_string(d) + (gemma ? " gemma" : " llama") + " y[" + std::to_string(i) +
                   "] = " + hex(y[i]) + ", numerics " + hex(ref[i]));
        }
      }
    }
  }
  fl.expect_none(k.info.name + (simd ? " (simd)" : " (scalar)") + " vs numerics on its path");
}

// Σx² by the kernels' reductions against numerics::dot on the same order, in fp32 (where any change of order
// shows, unlike after the output rounding), for PyTorch's configurations and the R2 chunks.
TEST(NormRows, SumsOfSquaresMatchNumerics) {
  std::mt19937_64 rng(test_seed());
  Failures fl;
  fl.set_seed(test_seed());
  AccumSpec sp;
  sp.in = Format::fp16;
  sp.acc = sp.out = Format::fp32;
  sp.fma = false;
  for (const bool simd : {true, false}) {
    SimdScope scope(simd);
    for (const std::size_t d : {1u, 7u, 64u, 100u, 128u, 132u, 1023u, 1024u, 1025u, 2304u, 4096u, 8192u}) {
      const auto x = random_tensor(Format::fp16, d, rng, 0.0, 1.0);
      const std::vector<double> xd(x.begin(), x.end());
      for (std::size_t rows : {1u, 2u, 5u, 8u, 16u, 100u}) {
        const cpu::R1Config c = cpu::r1_config(rows, d);
        if (c.unsupported) continue;
        ++fl.checked;
        const double want = dot(sp, cpu::r1_order(c), xd, xd);
        const float got = cpu::sum_sq_r1(x.data(), d, c);
        if (!same(got, want))
          fl.add("r1 d=" + std::to_string(d) + " rows=" + std::to_string(rows) + ": " + hex(got) + " vs " + hex(want));
      }
      for (std::size_t chunk : {8u, 1000u, 1024u}) {
        ++fl.checked;
        const double want = dot(sp, Blocked{chunk, true}, xd, xd);
        const float got = cpu::sum_sq_r2(x.data(), d, chunk);
        if (!same(got, want))
          fl.add("r2 d=" + std::to_string(d) + " chunk=" + std::to_string(chunk) + ": " + hex(got) + " vs " +
                 hex(want));
      }
    }
  }
  fl.expect_none("row sums of squares vs numerics");
}

TEST(NormKernels, RegistryHoldsTheCatalogue) {
  const Registry& r = registry();
  for (const char* name : {"cpu.norm.r1.f16", "cpu.norm.r1.bf16", "cpu.norm.r1.f32", "cpu.norm.r2.f16",
                           "cpu.norm.r2.bf16", "cpu.norm.r2.f32"})
    ASSERT_NE(r.find_norm(name), nullptr) << name;
  for (const NormKernel& k : r.norm()) {
    EXPECT_EQ(k.info.cache_invariant, k.info.name.rfind("cpu.norm.r2", 0) == 0) << k.info.name;
    EXPECT_EQ(k.info.acc, Format::fp32);
    EXPECT_EQ(k.info.in, k.info.out);
    const NormPath p = k.path({4, 4096});
    EXPECT_EQ(p.spec.in, k.info.in);
    EXPECT_FALSE(p.spec.fma) << "x.pow(2) is materialised: a rounded square, then an addition";
  }
}

TEST(NormKernels, EveryKernelMatchesNumericsBitForBit) {
  for (const NormKernel& k : registry().norm()) check_norm_kernel(k, true);
}

TEST(NormKernels, ScalarLoopsMatchNumericsBitForBit) {
  for (const NormKernel& k : registry().norm()) check_norm_kernel(k, false);
}

// PyTorch's configuration for d = 4096 (float4 loads, dim0 = 1024): 1 row → 512 threads per row, 2–3 → 256,
// 4–7 → 128, 8–15 → 64, >= 16 → 32; d <= 128 is not vectorised (vt0 = 4 interleaved accumulators).
TEST(NormKernels, R1ThreadsFollowPyTorchsLaunchConfiguration) {
  const NormKernel* r1 = registry().find_norm("cpu.norm.r1.f16");
  ASSERT_NE(r1, nullptr);
  const auto order_of = [&](std::size_t rows, std::size_t d) { return order_name(r1->path({rows, d}).order); };
  EXPECT_EQ(order_of(1, 4096), "ts512v4l_bf");
  EXPECT_EQ(order_of(2, 4096), "ts256v4l_bf");
  EXPECT_EQ(order_of(3, 4096), "ts256v4l_bf");
  EXPECT_EQ(order_of(4, 4096), "ts128v4l_bf");
  EXPECT_EQ(order_of(7, 4096), "ts128v4l_bf");
  EXPECT_EQ(order_of(8, 4096), "ts64v4l_bf");
  EXPECT_EQ(order_of(16, 4096), "ts32v4l_bf");
  EXPECT_EQ(order_of(1000, 4096), "ts32v4l_bf");
  EXPECT_EQ(order_of(1, 2304), "ts512v4l_bf");  // dim0 = 576 → 512
  EXPECT_EQ(order_of(1, 64), "ts64v1i4_bf");    // not vectorised: dim0 = 64
  EXPECT_EQ(order_of(16, 64), "ts32v1i4_bf");
  EXPECT_EQ(order_of(1, 100), "ts64v1i4_bf");
  // Shapes PyTorch reduces differently (misaligned rows; the row split across y threads) are refused.
  EXPECT_TRUE(r1->supports({1, 130}).has_value());
  EXPECT_TRUE(r1->supports({16, 8192}).has_value());
  EXPECT_FALSE(r1->supports({1, 8192}).has_value());
  std::vector<float> x(16 * 8192, 1.0f), w(8192, 1.0f), y(16 * 8192);
  EXPECT_THROW(r1->run({16, 8192}, NormParams{}, x, w, y), std::invalid_argument);
  // R2: one path whatever the rows.
  const NormKernel* r2 = registry().find_norm("cpu.norm.r2.f16");
  for (std::size_t rows : {1u, 2u, 7u, 64u}) EXPECT_EQ(order_name(r2->path({rows, 4096}).order), "blocked1024_tree");
}

// R2 rows are bitwise independent of the rows in the call. R1's Σx² — which the kernel reproduces bit for bit
// (above) — differs for some rows between a 1-row call (512 threads per row) and a 64-row call (32 threads);
// whether that reaches the output depends on the later roundings, so the output count is only reported.
TEST(NormKernels, RowsDependOnTheCallOnlyForR1) {
  std::mt19937_64 rng(test_seed());
  const std::size_t rows = 64, d = 4096;
  for (const NormKernel& k : registry().norm()) {
    const auto x = random_tensor(k.info.in, rows * d, rng, 0.0, 1.0);
    const auto w = random_tensor(k.info.in, d, rng, 1.0, 0.5);
    std::vector<float> full(rows * d), one(d);
    k.run({rows, d}, NormParams{}, x, w, full);
    std::size_t differing = 0, sums_differing = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::vector<float> xr(x.begin() + static_cast<std::ptrdiff_t>(r * d),
                                  x.begin() + static_cast<std::ptrdiff_t>((r + 1) * d));
      k.run({1, d}, NormParams{}, xr, w, one);
      for (std::size_t i = 0; i < d; ++i) differing += same(one[i], full[r * d + i]) ? 0 : 1;
      const std::vector<double> xd(xr.begin(), xr.end());
      const NormPath p1 = k.path({1, d}), pn = k.path({rows, d});
      sums_differing += same(dot(p1.spec, p1.order, xd, xd), dot(pn.spec, pn.order, xd, xd)) ? 0 : 1;
    }
    if (k.info.cache_invariant) {
      EXPECT_EQ(differing, 0u) << k.info.name;
      EXPECT_EQ(sums_differing, 0u) << k.info.name;
    } else {
      EXPECT_GT(sums_differing, 0u) << k.info.name << " (seed " << test_seed() << ")";
    }
    std::printf("[   info   ] %s: Σx² differs in %zu of %zu rows, outputs in %zu of %zu (1-row vs 64-row calls)\n",
                k.info.name.c_str(), sums_differing, rows, differing, rows * d);
  }
}

// The kernels conform: |y − y_exact| within ref::rms_norm_error_bound for their path, against the oracle.
TEST(NormKernels, WithinTheOracleBound) {
  std::mt19937_64 rng(test_seed());
  for (const NormKernel& k : registry().norm()) {
    double worst = 0.0;
    for (const NormShape s : {NormShape{1, 4096}, NormShape{3, 2304}, NormShape{16, 100}}) {
      for (const bool gemma : {false, true}) {
        NormParams p;
        p.one_plus_weight = gemma;
        const auto x = random_tensor(k.info.in, s.rows * s.d, rng, 0.0, 2.0);
        const auto w = random_tensor(k.info.in, s.d, rng, gemma ? 0.0 : 1.0, 0.5);
        std::vector<float> y(s.rows * s.d);
        k.run(s, p, x, w, y);
        const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end());
        const ref::RmsNormResult o = ref::rms_norm(xd, wd, s.rows, s.d, p.eps, gemma, k.info.in, {k.info.out});
        const NormPath path = k.path(s);
        for (std::size_t r = 0; r < s.rows; ++r) {
          ref::RmsNormErrorInputs bi;
          bi.d = s.d;
          bi.sum_sq = o.sum_sq[r];
          bi.eps = p.eps;
          bi.sum_terms = ref::dot_error_terms(path.spec, path.order, s.d);
          bi.rsqrt_rel_error = kExpRelError;  // rsqrt_f32: sqrt and division in double, one fp32 rounding
          bi.one_plus_weight = gemma;
          bi.out = k.info.out;
          const ref::RmsNormErrorTerms t = ref::rms_norm_error_terms(bi);
          for (std::size_t i = 0; i < s.d; ++i) {
            const double ex = o.approx[r * s.d + i];
            const double err = std::fabs(y[r * s.d + i] - ex) + p2(-52) * std::fabs(ex);
            const double bound = t.at(std::fabs(ex) * (1 + p2(-52)), gemma ? 1.0 + std::fabs(wd[i]) : std::fabs(wd[i]));
            ASSERT_LE(err, bound) << k.info.name << " rows=" << s.rows << " d=" << s.d << " i=" << i;
            worst = std::max(worst, err / bound);
          }
        }
      }
    }
    std::printf("[   info   ] %s: max error / bound %.3f\n", k.info.name.c_str(), worst);
  }
}

}  // namespace
}  // namespace kvconf::kernels
