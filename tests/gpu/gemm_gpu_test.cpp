// GPU GEMM conformance (label gpu; every case GTEST_SKIPs with gpu_unavailable()'s reason where no device runs):
//  - Cuda/GpuGemmBitwise.MatchesEmulation: cuda.gemm.fixed.f16 and cuda.gemm.rowdot.f32acc equal, bit for bit,
//    numerics::dot on their path() for every element, on random and integer-valued inputs, with M = 1 and M = n;
//    and (both claim cache_invariant) the M = 1 rows equal the M = n rows bitwise.
//  - Cuda/GpuGemmTensorCore.ModelAgreement: cuda.gemm.cublas.f16.acc32 against the tensor-core block-FMA model
//    with the device's parameters (its path()): RECORDS whether they agree bit for bit and the max ulp difference
//    (a finding either way); asserts only the a-priori bound of that path against the oracle.
//  - GpuGemmWeights.UploadedOnceAndRefreshedOnChange: weight residency.
// Rules 1 and 2 (check_gemm_matches_oracle, check_projection_cache_on_off) on every cuda.gemm.* kernel come from the
// conformance suites built over gpu_registry(): Cuda/GemmConformance.MatchesOracle/<kernel>__<case>,
// Cuda/ProjectionConformance.CacheOnMatchesCacheOff/<kernel>__<case> (conformance/suites/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kvconf/kernels/cublas.hpp"
#include "kvconf/kernels/gpu.hpp"
#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/oracle.hpp"
#include "test_support.hpp"

namespace kvconf {
namespace {

using kernels::GemmKernel;
using kernels::GemmShape;

const kernels::Registry& gpu_gemms() {
  static const kernels::Registry r = [] {
    kernels::Registry g;
    kernels::register_cublas_kernels(g);
    return g;
  }();
  return r;
}

const GemmKernel& gemm(const std::string& name) {
  const GemmKernel* k = gpu_gemms().find_gemm(name);
  if (k == nullptr) throw std::logic_error("kernel not registered: " + name);
  return *k;
}

// One input set: t rows of x (t, k) and weights w (n, k), fp16 values in floats.
struct GpuCase {
  std::string kernel;
  std::size_t t = 1, n = 1, k = 1;
  bool integer = false;  // small integers (exact products and sums): layout and casts only; else N(0,1), w / √k
  std::string id() const {
    std::string s = "t";
    s += std::to_string(t) + "_n" + std::to_string(n) + "_k" + std::to_string(k) + (integer ? "_int" : "_normal");
    return s;
  }
};

struct Inputs {
  std::vector<float> x, w;  // (t, k), (n, k)
};

Inputs make_inputs(const GpuCase& c, std::uint64_t seed) {
  Inputs in;
  if (c.integer) {
    // |x|, |w| <= 3: |Σ| <= 9k < 65504 (fp16 max) for k <= 4096; every partial sum is an integer < 2^24.
    std::mt19937_64 g(seed);
    std::uniform_int_distribution<int> d(-3, 3);
    in.x.resize(c.t * c.k);
    in.w.resize(c.n * c.k);
    for (auto& v : in.x) v = static_cast<float>(d(g));
    for (auto& v : in.w) v = static_cast<float>(d(g));
    return in;
  }
  const auto to_f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  in.x = to_f(test::randn(c.t * c.k, Format::fp16, seed));
  in.w = to_f(test::randn(c.n * c.k, Format::fp16, seed ^ 0x5bd1e995u, 1.0 / std::sqrt(static_cast<double>(c.k))));
  return in;
}

std::vector<double> row(const std::vector<float>& a, std::size_t r, std::size_t k) {
  return std::vector<double>(a.begin() + static_cast<std::ptrdiff_t>(r * k),
                             a.begin() + static_cast<std::ptrdiff_t>((r + 1) * k));
}

// y (t, n): the M = t call, and y1 (t, n): the same rows computed one M = 1 call each (the decode path).
struct Outputs {
  std::vector<float> full, ones;
};

Outputs run_both(const GemmKernel& k, const GpuCase& c, const Inputs& in) {
  Outputs o;
  o.full.assign(c.t * c.n, 0.0f);
  k.run({c.t, c.n, c.k}, in.x, in.w, o.full);
  o.ones.assign(c.t * c.n, 0.0f);
  for (std::size_t r = 0; r < c.t; ++r)
    k.run({1, c.n, c.k}, std::span<const float>(in.x).subspan(r * c.k, c.k), in.w,
          std::span<float>(o.ones).subspan(r * c.n, c.n));
  return o;
}

kernels::Reason unsupported(const GemmKernel& k, const GpuCase& c) {
  if (auto why = k.supports({c.t, c.n, c.k})) return why;
  return k.supports({1, c.n, c.k});
}

std::string sanitize(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::string num17(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

std::string hexf(float v) { return test::hex(static_cast<double>(v)); }

// |a − b| in ulps of fp16 at max(|a|, |b|) (subnormal spacing below 2^-14).
double ulps_fp16(float a, float b) {
  if (same_bits(a, b)) return 0.0;
  if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
  const double m = std::max(std::fabs(static_cast<double>(a)), std::fabs(static_cast<double>(b)));
  const int e = m > 0 ? std::max(std::ilogb(m), -14) : -14;
  return std::fabs(static_cast<double>(a) - static_cast<double>(b)) / std::ldexp(1.0, e - 10);
}

std::vector<GpuCase> cases_for(const std::string& kernel) {
  std::vector<GpuCase> v;
  for (bool integer : {false, true}) {
    v.push_back({kernel, 13, 40, 1000, integer});  // k not a multiple of 32 or 16
    v.push_back({kernel, 5, 33, 17, integer});     // k < 32: rowdot lanes without terms hold +0
    v.push_back({kernel, 9, 64, 4096, integer});   // Llama-sized reduction
  }
  return v;
}

struct CaseName {
  std::string operator()(const ::testing::TestParamInfo<GpuCase>& i) const {
    return sanitize(i.param.kernel) + "__" + i.param.id();
  }
};

// ---- (d), (e): bitwise against the CPU emulation ----------------------------------------------------------------

class GpuGemmBitwise : public ::testing::TestWithParam<GpuCase> {};

TEST_P(GpuGemmBitwise, MatchesEmulation) {
  const GpuCase& c = GetParam();
  const GemmKernel& k = gemm(c.kernel);
  if (auto why = unsupported(k, c)) GTEST_SKIP() << *why;
  const std::uint64_t seed = test::test_seed();
  const Inputs in = make_inputs(c, seed);
  const Outputs y = run_both(k, c, in);
  const kernels::GemmPath p_full = k.path({c.t, c.n, c.k}), p_one = k.path({1, c.n, c.k});
  test::Failures f;
  f.set_seed(seed);
  for (std::size_t r = 0; r < c.t; ++r) {
    const std::vector<double> xr = row(in.x, r, c.k);
    for (std::size_t j = 0; j < c.n; ++j) {
      const std::vector<double> wj = row(in.w, j, c.k);
      const float e_full = static_cast<float>(dot(p_full.spec, p_full.order, xr, wj));
      const float e_one = static_cast<float>(dot(p_one.spec, p_one.order, xr, wj));
      const std::size_t i = r * c.n + j;
      std::string at = "(";
      at += std::to_string(r) + "," + std::to_string(j) + ")";
      f.checked += 3;
      if (!same_bits(y.full[i], e_full))
        f.add("M=" + std::to_string(c.t) + " " + at + " gpu=" + hexf(y.full[i]) + " emulation(" + p_full.name +
              ")=" + hexf(e_full));
      if (!same_bits(y.ones[i], e_one))
        f.add("M=1 " + at + " gpu=" + hexf(y.ones[i]) + " emulation(" + p_one.name + ")=" + hexf(e_one));
      if (k.info.cache_invariant && !same_bits(y.ones[i], y.full[i]))
        f.add("cache_invariant: M=1 " + at + " " + hexf(y.ones[i]) + " != M=" + std::to_string(c.t) + " " +
              hexf(y.full[i]));
    }
  }
  ::testing::Test::RecordProperty("path", p_full.name);
  f.expect_none(c.kernel + " vs numerics::dot on its path, " + c.id());
}

std::vector<GpuCase> bitwise_cases() {
  std::vector<GpuCase> v;
  for (const char* k : {"cuda.gemm.fixed.f16", "cuda.gemm.rowdot.f32acc"})
    for (const GpuCase& c : cases_for(k)) v.push_back(c);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cuda, GpuGemmBitwise, ::testing::ValuesIn(bitwise_cases()), CaseName{});

// ---- (a): cuBLAS fp16 against the tensor-core block-FMA model (record), within its bound (assert) ---------------

// |y − exact| rounded up, exact known as `approx` (nearest double): + one double ulp of approx.
double error_up(double y, double approx) {
  const double d = std::fabs(y - approx);
  const double a = std::fabs(approx);
  return std::nextafter(d + (std::nextafter(a, INFINITY) - a), INFINITY);
}

class GpuGemmTensorCore : public ::testing::TestWithParam<GpuCase> {};

TEST_P(GpuGemmTensorCore, ModelAgreement) {
  const GpuCase& c = GetParam();
  const GemmKernel& k = gemm(c.kernel);
  if (auto why = unsupported(k, c)) GTEST_SKIP() << *why;
  const std::uint64_t seed = test::test_seed();
  const Inputs in = make_inputs(c, seed);
  const Outputs y = run_both(k, c, in);
  const std::vector<double> xd(in.x.begin(), in.x.end()), wd(in.w.begin(), in.w.end());
  ref::OracleOptions opt;
  opt.out = Format::fp16;
  const ref::ProjectionResult orc = ref::project(xd, wd, c.t, c.k, c.n, Format::fp16, opt);
  double max_abs = 0.0;
  for (double v : xd) max_abs = std::max(max_abs, std::fabs(v));
  for (double v : wd) max_abs = std::max(max_abs, std::fabs(v));

  ::testing::Test::RecordProperty("tensor_core_model", kernels::gpu_tensor_core_model());
  test::Failures bound;
  bound.set_seed(seed);
  for (const bool decode : {false, true}) {
    const std::vector<float>& got = decode ? y.ones : y.full;
    const std::size_t m = decode ? 1 : c.t;
    const kernels::GemmPath p = k.path({m, c.n, c.k});
    const ref::ErrorTerms terms = ref::dot_error_terms(p.spec, p.order, c.k, max_abs);
    std::size_t differing = 0;
    double max_ulp = 0.0;
    for (std::size_t r = 0; r < c.t; ++r) {
      const std::vector<double> xr = row(in.x, r, c.k);
      for (std::size_t j = 0; j < c.n; ++j) {
        const std::size_t i = r * c.n + j;
        const float model = static_cast<float>(dot(p.spec, p.order, xr, row(in.w, j, c.k)));
        if (!same_bits(got[i], model)) ++differing;
        max_ulp = std::max(max_ulp, ulps_fp16(got[i], model));
        const double err = error_up(got[i], orc.approx[i]), b = terms.at(orc.abs_sum[i]);
        ++bound.checked;
        if (!(err <= b))
          bound.add("M=" + std::to_string(m) + " (" + std::to_string(r) + "," + std::to_string(j) +
                    ") gpu=" + hexf(got[i]) + " oracle=" + test::hex(orc.approx[i]) + " error=" + test::hex(err) +
                    " bound(" + p.name + ")=" + test::hex(b));
      }
    }
    std::string tag = "m";
    tag += decode ? std::string("1") : std::to_string(c.t);
    ::testing::Test::RecordProperty("model_bitwise_equal." + tag, differing == 0 ? "true" : "false");
    ::testing::Test::RecordProperty("model_differing." + tag, std::to_string(differing));
    ::testing::Test::RecordProperty("model_max_ulp_fp16." + tag, num17(max_ulp));
    std::printf("[  finding ] %s %s %s vs %s: %zu of %zu elements differ from the model, max %.17g fp16 ulp\n",
                c.kernel.c_str(), c.id().c_str(), tag.c_str(), p.name.c_str(), differing, c.t * c.n, max_ulp);
  }
  bound.expect_none(c.kernel + " within the a-priori bound of its tensor-core path, " + c.id());
}

INSTANTIATE_TEST_SUITE_P(Cuda, GpuGemmTensorCore, ::testing::ValuesIn(cases_for("cuda.gemm.cublas.f16.acc32")),
                         CaseName{});

// ---- weight residency ------------------------------------------------------------------------------------------

// The same host weights are uploaded once; new contents at the same address are re-uploaded (not served stale).
TEST(GpuGemmWeights, UploadedOnceAndRefreshedOnChange) {
  const GemmKernel& k = gemm("cuda.gemm.fixed.f16");
  const std::size_t n = 32, kk = 64;
  if (auto why = k.supports({1, n, kk})) GTEST_SKIP() << *why;
  kernels::drop_gpu_weight_cache();
  std::vector<float> x(kk, 1.0f), w(n * kk, 1.0f), y(n);
  k.run({1, n, kk}, x, w, y);
  k.run({1, n, kk}, x, w, y);
  auto s = kernels::gpu_weight_cache_stats();
  EXPECT_EQ(s.uploads, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(y[0], 64.0f);
  std::fill(w.begin(), w.end(), 2.0f);  // same pointer and size, new contents
  k.run({1, n, kk}, x, w, y);
  s = kernels::gpu_weight_cache_stats();
  EXPECT_EQ(s.uploads, 2u);
  EXPECT_EQ(y[0], 128.0f) << "stale device weights served after the host buffer changed";
  kernels::pin_gpu_weights(w.data(), w.size());
  k.run({1, n, kk}, x, w, y);
  EXPECT_EQ(kernels::gpu_weight_cache_stats().uploads, 2u);
  kernels::drop_gpu_weight_cache();
  EXPECT_EQ(kernels::gpu_weight_cache_stats().entries, 0u);
}

}  // namespace
}  // namespace kvconf
