// Unit tests of the CPU GEMM kernels (kernels/cpu/gemm_*.cpp): for every registered GEMM kernel and call
// shapes M ∈ {1, 2, 7, 64}, K ∈ {64, 100, 4096} (and 1025 for M <= 2), the fast kernel equals numerics::dot(path.spec,
// path.order) bit for bit (AVX2 and scalar loops alike); the path changes with M exactly where the real stack's does
// (G2 split-K, G3 GEMV) and not where it must not (G1: rows are bitwise independent of M).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm_core.hpp"  // kernels/cpu: the inner loops, tested before the output rounding
#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/accumulate.hpp"
#include "test_support.hpp"

namespace kvconf::kernels {
namespace {

using namespace kvconf::test;

// One registry for the whole test program (kernels hold no state).
const Registry& registry() {
  static const Registry r = cpu_registry();
  return r;
}

// Restores the implementation switch when a test ends.
struct SimdScope {
  bool saved = simd_enabled();
  explicit SimdScope(bool on) { set_simd_enabled(on); }
  ~SimdScope() { set_simd_enabled(saved); }
};

std::vector<float> random_tensor(Format f, std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(round_to(f, g(rng)));
  return v;
}

std::vector<float> run(const GemmKernel& k, const GemmShape& s, const std::vector<float>& x,
                       const std::vector<float>& w) {
  std::vector<float> y(s.m * s.n, -1.0f);
  k.run(s, x, w, y);
  return y;
}

// The output elements checked against numerics: all for small outputs, else corners, panel edges and a
// random sample.
std::vector<std::pair<std::size_t, std::size_t>> sample(const GemmShape& s, std::mt19937_64& rng) {
  std::vector<std::pair<std::size_t, std::size_t>> e;
  if (s.m * s.n * s.k <= (1u << 18)) {
    for (std::size_t r = 0; r < s.m; ++r)
      for (std::size_t j = 0; j < s.n; ++j) e.emplace_back(r, j);
    return e;
  }
  std::set<std::size_t> rows{0, s.m - 1, s.m / 2}, cols{0, 7, 8, 31, 32, s.n - 1};
  std::uniform_int_distribution<std::size_t> ur(0, s.m - 1), uc(0, s.n - 1);
  for (int i = 0; i < 3; ++i) rows.insert(ur(rng));
  for (int i = 0; i < 4; ++i) cols.insert(uc(rng));
  for (std::size_t r : rows)
    for (std::size_t j : cols)
      if (j < s.n) e.emplace_back(r, j);
  return e;
}

void check_kernel_matches_numerics(const GemmKernel& k, bool simd) {
  SimdScope scope(simd);
  const std::uint64_t seed = test_seed() ^ std::hash<std::string>{}(k.info.name);
  std::mt19937_64 rng(seed);
  Failures f;
  f.set_seed(seed);
  for (std::size_t m : {1u, 2u, 7u, 64u}) {
    for (std::size_t kk : {64u, 100u, 1025u, 4096u}) {
      if (kk == 1025 && m > 2) continue;  // odd K with a partial last GEMV visit: decode-sized calls only
      for (std::size_t n : {37u, 64u}) {
        const GemmShape s{m, n, kk};
        if (k.supports(s)) continue;
        for (int rep = 0; rep < 2; ++rep) {
          const auto x = random_tensor(k.info.in, m * kk, rng);
          const auto w = random_tensor(k.info.in, n * kk, rng);
          const auto y = run(k, s, x, w);
          const GemmPath p = k.path(s);
          std::vector<double> xr(kk), wr(kk);
          for (const auto& [r, j] : sample(s, rng)) {
            for (std::size_t i = 0; i < kk; ++i) xr[i] = x[r * kk + i], wr[i] = w[j * kk + i];
            const double expect = dot(p.spec, p.order, xr, wr);
            ++f.checked;
            if (!same(static_cast<double>(y[r * n + j]), expect))
              f.add(k.info.name + (simd ? " simd" : " scalar") + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                    " k=" + std::to_string(kk) + " path " + p.name + " y[" + std::to_string(r) + "][" +
                    std::to_string(j) + "] = " + hex(y[r * n + j]) + ", numerics " + hex(expect));
          }
        }
      }
    }
  }
  f.expect_none(k.info.name + (simd ? " (simd)" : " (scalar)") + " vs numerics::dot on its path");
}

TEST(GemmKernels, RegistryHoldsTheCatalogue) {
  const Registry& r = registry();
  for (const char* name :
       {"cpu.gemm.g1.f16", "cpu.gemm.g1.bf16", "cpu.gemm.g1.f32", "cpu.gemm.g1tc.h100.f16", "cpu.gemm.g2.f16.acc32",
        "cpu.gemm.g2.f16.out16", "cpu.gemm.g2.f32", "cpu.gemm.g3.f16.acc32", "cpu.gemm.g3g4.f16.acc16"})
    EXPECT_NE(r.find_gemm(name), nullptr) << name;
  EXPECT_EQ(r.find_gemm("cpu.gemm.g2.f16.out16")->info.partial, Format::fp16);
  EXPECT_EQ(r.find_gemm("cpu.gemm.g3g4.f16.acc16")->info.partial, Format::fp16);
  EXPECT_EQ(r.find_gemm("cpu.gemm.g3g4.f16.acc16")->info.acc, Format::fp16);
  EXPECT_EQ(r.find_gemm("cpu.gemm.g2.f16.acc32")->info.partial, Format::fp32);
  for (const GemmKernel& k : r.gemm()) {
    const bool g1 = k.info.name.rfind("cpu.gemm.g1", 0) == 0;
    EXPECT_EQ(k.info.cache_invariant, g1) << k.info.name;
    EXPECT_FALSE(k.info.mirrors.empty()) << k.info.name;
    // A path's spec matches the kernel's declared formats.
    const GemmPath p = k.path(GemmShape{64, 64, 4096});
    EXPECT_EQ(p.spec.in, k.info.in) << k.info.name;
    EXPECT_EQ(p.spec.out, k.info.out) << k.info.name;
  }
}

TEST(GemmKernels, EveryKernelMatchesNumericsBitForBit) {
  for (const GemmKernel& k : registry().gemm()) check_kernel_matches_numerics(k, true);
}

TEST(GemmKernels, ScalarLoopsMatchNumericsBitForBit) {
  for (const GemmKernel& k : registry().gemm()) check_kernel_matches_numerics(k, false);
}

// Every output element, AVX2 vs scalar loops, on odd shapes (tails of panels, pairs, k blocks).
TEST(GemmKernels, SimdAndScalarLoopsAgreeEverywhere) {
  std::mt19937_64 rng(test_seed());
  Failures f;
  f.set_seed(test_seed());
  for (const GemmKernel& k : registry().gemm()) {
    for (const GemmShape s :
         {GemmShape{1, 5, 3}, GemmShape{3, 9, 17}, GemmShape{1, 33, 257}, GemmShape{5, 41, 1025}, GemmShape{1, 3, 0},
          GemmShape{2, 70, 4097}, GemmShape{1, 19, 1025}, GemmShape{1, 7, 11008}}) {
      const auto x = random_tensor(k.info.in, s.m * s.k, rng);
      const auto w = random_tensor(k.info.in, s.n * s.k, rng);
      std::vector<float> a, b;
      {
        SimdScope on(true);
        a = run(k, s, x, w);
      }
      {
        SimdScope off(false);
        b = run(k, s, x, w);
      }
      for (std::size_t i = 0; i < a.size(); ++i) {
        ++f.checked;
        if (!same(a[i], b[i]))
          f.add(k.info.name + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                " element " + std::to_string(i) + ": " + hex(a[i]) + " vs " + hex(b[i]));
      }
    }
  }
  f.expect_none("AVX2 vs scalar loops");
}

// The call shape picks the path as the real stacks do.
TEST(GemmKernels, PathDependsOnTheShapeWhereTheStackDoes) {
  const Registry& r = registry();
  const auto name_of = [&](const char* kernel, GemmShape s) { return r.find_gemm(kernel)->path(s).name; };
  // G2: split-K at decode-sized M with large K (tiles = 32 of 128×128 at N = 4096: S = 4; N = 64: S = 8);
  // never for prefill-sized M or short K.
  EXPECT_EQ(name_of("cpu.gemm.g2.f16.acc32", {1, 4096, 4096}), "splitk4_acc");
  EXPECT_EQ(name_of("cpu.gemm.g2.f16.acc32", {7, 64, 4096}), "splitk8_acc");
  EXPECT_EQ(name_of("cpu.gemm.g2.f16.out16", {1, 4096, 4096}), "splitk4_out");
  EXPECT_EQ(name_of("cpu.gemm.g2.f16.acc32", {64, 4096, 4096}), "tiled_bk64");
  EXPECT_EQ(name_of("cpu.gemm.g2.f16.acc32", {1, 4096, 100}), "tiled_bk64");
  EXPECT_EQ(name_of("cpu.gemm.g2.f16.acc32", {1, 32768, 4096}), "tiled_bk64");  // 256 tiles fill the GPU
  // G3: GEMV at M = 1 with llama.cpp's thread count (the first of 32, 64, ..., 256 minimising ceil(K/2T)).
  EXPECT_EQ(name_of("cpu.gemm.g3.f16.acc32", {1, 64, 4096}), "gemv_ts256v2");
  EXPECT_EQ(name_of("cpu.gemm.g3.f16.acc32", {1, 64, 100}), "gemv_ts64v2");
  EXPECT_EQ(name_of("cpu.gemm.g3.f16.acc32", {1, 64, 640}), "gemv_ts160v2");
  EXPECT_EQ(name_of("cpu.gemm.g3.f16.acc32", {1, 64, 64}), "gemv_ts32v2");
  EXPECT_EQ(name_of("cpu.gemm.g3.f16.acc32", {2, 64, 4096}), "tiled_bk64");
  EXPECT_EQ(name_of("cpu.gemm.g3g4.f16.acc16", {1, 64, 4096}), "gemv_ts256v2l_cfp32");
  EXPECT_EQ(name_of("cpu.gemm.g3g4.f16.acc16", {2, 64, 4096}), "cublas_compute16f");
  // G1: one path for every M.
  for (const GemmKernel& k : r.gemm()) {
    if (!k.info.cache_invariant) continue;
    const std::string base = order_name(k.path({1, 64, 4096}).order);
    for (std::size_t m : {2u, 7u, 64u, 1000u}) EXPECT_EQ(order_name(k.path({m, 64, 4096}).order), base) << k.info.name;
  }
}

// Cache-invariant kernels: each row of an M-row call equals the M = 1 call on that row, bitwise. The others
// do compute a different function of M at K = 4096 (some element of the decode call differs from the same
// row inside a prefill call).
TEST(GemmKernels, RowsOfInvariantKernelsDoNotDependOnM) {
  std::mt19937_64 rng(test_seed());
  const std::size_t n = 64, K = 4096, M = 64;
  for (const GemmKernel& k : registry().gemm()) {
    const auto x = random_tensor(k.info.in, M * K, rng);
    const auto w = random_tensor(k.info.in, n * K, rng);
    const auto full = run(k, {M, n, K}, x, w);
    std::size_t differing = 0;
    for (std::size_t r = 0; r < M; ++r) {
      const std::vector<float> xr(x.begin() + static_cast<std::ptrdiff_t>(r * K),
                                  x.begin() + static_cast<std::ptrdiff_t>((r + 1) * K));
      const auto one = run(k, {1, n, K}, xr, w);
      for (std::size_t j = 0; j < n; ++j) differing += same(one[j], full[r * n + j]) ? 0 : 1;
    }
    const bool path_changes = order_name(k.path({1, n, K}).order) != order_name(k.path({M, n, K}).order);
    if (k.info.cache_invariant) {
      EXPECT_EQ(differing, 0u) << k.info.name << " claims cache invariance";
    } else {
      EXPECT_TRUE(path_changes) << k.info.name;
      EXPECT_GT(differing, 0u) << k.info.name << ": the decode path should differ somewhere (seed " << test_seed()
                               << ")";
    }
    std::printf("[   info   ] %s: %zu of %zu outputs differ between M = 1 and M = %zu calls\n", k.info.name.c_str(),
                differing, M * n, M);
  }
}

// The inner loops before any output rounding (fp32 / fp16 accumulators), where a changed order shows in
// almost every element, unlike after the fp16 output rounding.
TEST(GemmCoreLoops, MatchNumericsBeforeTheOutputRounding) {
  std::mt19937_64 rng(test_seed());
  Failures f;
  f.set_seed(test_seed());
  const auto spec = [](Format acc) {
    AccumSpec s;
    s.in = Format::fp16;
    s.acc = acc;
    s.out = acc;
    return s;
  };
  for (const bool simd : {true, false}) {
    SimdScope scope(simd);
    for (const std::size_t K : {1u, 2u, 63u, 64u, 100u, 640u, 1025u, 4096u, 11008u}) {
      const std::size_t n = 13, m = 3;
      const auto x = random_tensor(Format::fp16, m * K, rng);
      const auto w = random_tensor(Format::fp16, n * K, rng);
      std::vector<double> xr(K), wr(K);
      const auto expect_row = [&](std::size_t r, std::size_t j, const AccumSpec& sp, const Order& o, std::size_t lo,
                                  std::size_t hi) {
        for (std::size_t i = 0; i < K; ++i) xr[i] = x[r * K + i], wr[i] = w[j * K + i];
        return dot(sp, o, std::span<const double>(xr).subspan(lo, hi - lo),
                   std::span<const double>(wr).subspan(lo, hi - lo));
      };
      const auto compare = [&](const std::string& what, double got, double want) {
        ++f.checked;
        if (!same(got, want))
          f.add(what + (simd ? " simd" : " scalar") + " K=" + std::to_string(K) + ": " + hex(got) + " vs " + hex(want));
      };
      // Chains over [lo, hi) (split-K slices), fp32 and fp16 accumulators.
      std::vector<float> out(m * n);
      for (const auto& [lo, hi] : {std::pair<std::size_t, std::size_t>{0, K}, {K / 3, K}, {0, (K + 1) / 2}}) {
        for (const cpu::ChainAcc a : {cpu::ChainAcc::fp32, cpu::ChainAcc::fp16}) {
          cpu::chain_gemm(a, x, w, m, n, K, lo, hi, out);
          const AccumSpec sp = spec(a == cpu::ChainAcc::fp32 ? Format::fp32 : Format::fp16);
          for (std::size_t r = 0; r < m; ++r)
            for (std::size_t j = 0; j < n; ++j)
              compare("chain", out[r * n + j], lo == hi ? 0.0 : expect_row(r, j, sp, Sequential{}, lo, hi));
        }
      }
      // GEMV for every llama.cpp block size, fp32 sums and half2 lanes.
      std::vector<float> y(n);
      for (std::size_t T = 32; T <= 256; T += 32) {
        for (const bool half2 : {false, true}) {
          cpu::gemv_thread_strided(half2, T, std::span<const float>(x).subspan(0, K), w, n, K, y);
          ThreadStrided o;
          o.threads = T;
          o.vec = 2;
          o.split_lanes = half2;
          if (half2) o.combine = Format::fp32;
          AccumSpec sp = spec(half2 ? Format::fp16 : Format::fp32);
          sp.out = Format::fp32;
          for (std::size_t j = 0; j < n; ++j) compare(order_name(o), y[j], expect_row(0, j, sp, o, 0, K));
        }
      }
      // Tensor-core blocks (H100, A100 and V100 parameters).
      for (const TensorCoreParams& p : {TensorCoreParams::h100(), TensorCoreParams::a100(), TensorCoreParams::v100()}) {
        cpu::tensor_core_gemm_f16(p, x, w, m, n, K, out);
        for (std::size_t r = 0; r < m; ++r)
          for (std::size_t j = 0; j < n; ++j)
            compare(order_name(TensorCore{p}), out[r * n + j],
                    expect_row(r, j, spec(Format::fp32), TensorCore{p}, 0, K));
      }
    }
  }
  f.expect_none("inner loops vs numerics (fp32 / fp16 accumulators, no output rounding)");
}

TEST(GemmKernels, RejectsMismatchedSpans) {
  for (const GemmKernel& k : registry().gemm()) {
    std::vector<float> x(6), w(6), y(4), y_bad(3);
    EXPECT_THROW(k.run({2, 2, 3}, x, w, y_bad), std::invalid_argument) << k.info.name;
    EXPECT_THROW(k.run({2, 2, 4}, x, w, y), std::invalid_argument) << k.info.name;
    EXPECT_NO_THROW(k.run({2, 2, 3}, x, w, y)) << k.info.name;
  }
}

}  // namespace
}  // namespace kvconf::kernels
