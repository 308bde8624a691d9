// Speed of the CPU GEMM kernels (kernels/cpu/gemm_*.cpp) at decode (M = 1) and prefill (M = 128) shapes with
// n = k = 4096 and n = k = 1024, single-threaded, against two plain-fp32 kernels with the same per-element
// loop order (one sequential FMA chain over k per output): `plain.f32.naive` (i, j, k loops, scalar) and
// `plain.f32.wt` (i, k, j loops over a pre-transposed W, which the compiler vectorises across j).
// Counter GFLOP/s = 2·m·n·k / time. Run: build/bench/kvconf_bench_kernels --benchmark_filter=gemm/
#include <benchmark/benchmark.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace {

using kvconf::Format;
using kvconf::kernels::GemmKernel;
using kvconf::kernels::GemmShape;

const kvconf::kernels::Registry& registry() {
  static const kvconf::kernels::Registry r = kvconf::kernels::cpu_registry();
  return r;
}

struct Operands {
  std::vector<float> x;   // (m, k)
  std::vector<float> w;   // (n, k)
  std::vector<float> wt;  // (k, n): W transposed, for the vectorised plain baseline
};

// Random N(0,1) operands rounded to `in`, cached per (format, shape).
const Operands& operands(Format in, const GemmShape& s) {
  static std::map<std::tuple<int, std::size_t, std::size_t, std::size_t>, Operands> cache;
  const auto key = std::make_tuple(static_cast<int>(in), s.m, s.n, s.k);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::mt19937_64 rng(s.m * 1000003 + s.n * 101 + s.k);
  std::normal_distribution<double> g(0.0, 1.0);
  Operands o;
  o.x.resize(s.m * s.k);
  o.w.resize(s.n * s.k);
  for (auto& v : o.x) v = static_cast<float>(kvconf::round_to(in, g(rng)));
  for (auto& v : o.w) v = static_cast<float>(kvconf::round_to(in, g(rng)));
  o.wt.resize(s.k * s.n);
  for (std::size_t j = 0; j < s.n; ++j)
    for (std::size_t kk = 0; kk < s.k; ++kk) o.wt[kk * s.n + j] = o.w[j * s.k + kk];
  return cache.emplace(key, std::move(o)).first->second;
}

void set_counters(benchmark::State& st, const GemmShape& s) {
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(s.m * s.n * s.k) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void bm_kernel(benchmark::State& st, const GemmKernel* k, GemmShape s) {
  const Operands& o = operands(k->info.in, s);
  std::vector<float> y(s.m * s.n);
  for (auto _ : st) {
    k->run(s, o.x, o.w, y);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetLabel(k->path(s).name);
  set_counters(st, s);
}

// Plain fp32, i-j-k: one chain per output, acc = fmaf(x, w, acc) in k order (latency bound).
void bm_plain_naive(benchmark::State& st, GemmShape s) {
  const Operands& o = operands(Format::fp32, s);
  std::vector<float> y(s.m * s.n);
  for (auto _ : st) {
    for (std::size_t i = 0; i < s.m; ++i)
      for (std::size_t j = 0; j < s.n; ++j) {
        const float* xr = o.x.data() + i * s.k;
        const float* wr = o.w.data() + j * s.k;
        float acc = xr[0] * wr[0];
        for (std::size_t kk = 1; kk < s.k; ++kk) acc = std::fmaf(xr[kk], wr[kk], acc);
        y[i * s.n + j] = acc;
      }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, s);
}

// Plain fp32, i-k-j over Wᵀ: the same per-output k order, independent outputs side by side.
void bm_plain_wt(benchmark::State& st, GemmShape s) {
  const Operands& o = operands(Format::fp32, s);
  std::vector<float> y(s.m * s.n);
  for (auto _ : st) {
    for (std::size_t i = 0; i < s.m; ++i) {
      float* yr = y.data() + i * s.n;
      const float* xr = o.x.data() + i * s.k;
      for (std::size_t j = 0; j < s.n; ++j) yr[j] = xr[0] * o.wt[j];
      for (std::size_t kk = 1; kk < s.k; ++kk) {
        const float xv = xr[kk];
        const float* wr = o.wt.data() + kk * s.n;
        for (std::size_t j = 0; j < s.n; ++j) yr[j] = std::fmaf(xv, wr[j], yr[j]);
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, s);
}

// "gemm/<what>/m<m>_n<n>_k<k>" (built by appending: GCC 12 warns falsely on literal + std::string).
std::string bench_name(const std::string& what, const GemmShape& s) {
  std::string r = "gemm/";
  r += what;
  r += "/m";
  r += std::to_string(s.m);
  r += "_n";
  r += std::to_string(s.n);
  r += "_k";
  r += std::to_string(s.k);
  return r;
}

const bool registered = [] {
  const GemmShape shapes[] = {{1, 4096, 4096}, {128, 4096, 4096}, {1, 1024, 1024}, {128, 1024, 1024}};
  for (const GemmShape& s : shapes) {
    const double work = static_cast<double>(s.m * s.n * s.k);
    benchmark::RegisterBenchmark(bench_name("plain.f32.wt", s).c_str(), bm_plain_wt, s)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.3);
    if (work <= 1.5e8)  // the scalar chain runs at ~1 GFLOP/s: skip the 4096 prefill
      benchmark::RegisterBenchmark(bench_name("plain.f32.naive", s).c_str(), bm_plain_naive, s)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    for (const GemmKernel& k : registry().gemm()) {
      // The tensor-core model (integer block FMAs, ~0.2 GFLOP/s) only on the smaller problems.
      if (k.info.name.find("g1tc") != std::string::npos && work > 1.5e8) continue;
      benchmark::RegisterBenchmark(bench_name(k.info.name, s).c_str(), bm_kernel, &k, s)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
  }
  return true;
}();

}  // namespace
