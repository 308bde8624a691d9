// What the oracle benchmarks (bench_oracle.cpp, bench_oracle_fp64.cpp) share: their two attention shapes (decode
// 1 x 4096 and prefill 512 x 512, d 128), N(0, 1) inputs rounded to fp16, and running Google Benchmark with a reporter.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "kvconf/numerics/rounding.hpp"

namespace kvconf::bench {

// One benchmarked attention shape: one head, head dim d, causal, n_q rows ending at n_kv; inputs from `seed` on.
struct OracleShape {
  const char* name;
  std::size_t n_q, n_kv, d;
  std::uint64_t seed;
};
inline constexpr OracleShape kDecodeShape{"decode_nkv4096_d128", 1, 4096, 128, 7};
inline constexpr OracleShape kPrefillShape{"prefill_n512_d128", 512, 512, 128, 17};

// A benchmark's own problems for both shapes (decode, prefill): make(name, n_q, n_kv, d, seed) on each.
template <class Make>
auto make_decode_and_prefill(Make make) {
  const auto one = [&](const OracleShape& s) { return make(s.name, s.n_q, s.n_kv, s.d, s.seed); };
  return std::pair{one(kDecodeShape), one(kPrefillShape)};
}

// n values, each an fp16 number held as a double (so an oracle takes it as exact).
inline std::vector<double> randn_fp16(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> x(n);
  for (auto& t : x) t = kvconf::round_to(Format::fp16, nd(g));
  return x;
}

// Google Benchmark over the registered benchmarks with `rep` as the reporter; false for an unknown argument.
template <class Reporter>
bool run_benchmarks(int& argc, char** argv, Reporter& rep) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return false;
  benchmark::RunSpecifiedBenchmarks(&rep);
  benchmark::Shutdown();
  return true;
}

}  // namespace kvconf::bench
