// Benchmark of the oracle's attention against a straightforward Boost mpfr_float implementation at
// the same precision in the same program: one decode query (n_kv = 4096, d = 128) and a causal
// prefill block (n = 512, d = 128), fp16 inputs, fp16 output. Every run checks that the correctly
// rounded outputs are identical; a difference fails the benchmark (SkipWithError, exit status 1).
// Prints the speedups at the end (target: the oracle >= 20x faster).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kvconf/numerics/rounding.hpp"
#include "oracle_bench.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_naive.hpp"

namespace {

using kvconf::Format;
namespace ref = kvconf::ref;

// The naive implementation's precision: Boost's smallest mpfr_float precision >= 64 bits (65 bits),
// just above the oracle's working precision on the common path (62-bit fixed point, certified).
constexpr unsigned kNaiveBits = 64;

struct Problem {
  const char* name;
  ref::AttentionShape sh;
  ref::AttentionParams pr;
  std::vector<double> q, k, v;    // q: (n_q, 1, d), k: (n_kv, 1, d), v: (n_kv, 1, d_v), fp16 values
  std::vector<double> reference;  // the oracle's output, computed once
};

using kvconf::bench::randn_fp16;

Problem make(const char* name, std::size_t n_q, std::size_t n_kv, std::size_t d, std::uint64_t seed) {
  Problem p{name, {n_q, n_kv, 1, 1, d, d}, {}, {}, {}, {}, {}};
  p.pr.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  p.pr.causal = true;
  p.pr.scale = 1.0 / std::sqrt(static_cast<double>(d));  // a double, taken as exact by both
  p.q = randn_fp16(n_q * d, seed);
  p.k = randn_fp16(n_kv * d, seed + 1);
  p.v = randn_fp16(n_kv * d, seed + 2);
  return p;
}

ref::OracleOptions options() {
  ref::OracleOptions o;
  o.out = Format::fp16;
  return o;
}

bool g_mismatch = false;

bool check(benchmark::State& state, const Problem& p, const std::vector<double>& out) {
  for (std::size_t t = 0; t < out.size(); ++t)
    if (out[t] != p.reference[t]) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s: output %zu differs (%.17g vs oracle %.17g)", p.name, t, out[t],
                    p.reference[t]);
      state.SkipWithError(buf);
      g_mismatch = true;
      return false;
    }
  return true;
}

void bm_oracle(benchmark::State& state, const Problem* p) {
  std::vector<double> out;
  int max_prec = 0;
  for (auto _ : state) {
    auto r = ref::attention(p->q, p->k, p->v, p->sh, p->pr, Format::fp16, options());
    benchmark::DoNotOptimize(r.out.data());
    out.swap(r.out);
    for (const auto& st : r.rows) max_prec = std::max(max_prec, st.precision_bits);
  }
  state.counters["max_precision_bits"] = max_prec;
  check(state, *p, out);
}

void bm_naive(benchmark::State& state, const Problem* p) {
  std::vector<double> out;
  for (auto _ : state) {
    out = ref::naive::attention(p->q, p->k, p->v, p->sh, p->pr, Format::fp16, {}, kNaiveBits);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["mpfr_bits"] = ref::naive::boost_bits(kNaiveBits);
  check(state, *p, out);
}

// Console output plus the mean real time per benchmark, for the speedup summary.
class Reporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> seconds;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs)
      if (!r.error_occurred && r.run_type == Run::RT_Iteration)
        seconds[r.run_name.function_name] = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
  }
};

}  // namespace

int main(int argc, char** argv) {
  static auto [decode, prefill] = kvconf::bench::make_decode_and_prefill(make);  // the shapes both benchmarks time
  for (Problem* p : {&decode, &prefill})
    p->reference = ref::attention(p->q, p->k, p->v, p->sh, p->pr, Format::fp16, options()).out;

  benchmark::RegisterBenchmark("oracle/decode_nkv4096_d128", bm_oracle, &decode)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("naive_boost/decode_nkv4096_d128", bm_naive, &decode)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("oracle/prefill_n512_d128", bm_oracle, &prefill)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("naive_boost/prefill_n512_d128", bm_naive, &prefill)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  Reporter rep;
  if (!kvconf::bench::run_benchmarks(argc, argv, rep)) return 2;
  for (const char* n : {decode.name, prefill.name}) {
    const auto o = rep.seconds.find(std::string("oracle/") + n);
    const auto b = rep.seconds.find(std::string("naive_boost/") + n);
    if (o != rep.seconds.end() && b != rep.seconds.end())
      std::printf(
          "speedup %-22s oracle %9.3f ms  naive Boost mpfr_float (%u bits) %10.3f ms  => %6.1fx (target >= 20x)\n", n,
          o->second * 1e3, ref::naive::boost_bits(kNaiveBits), b->second * 1e3, b->second / o->second);
  }
  if (g_mismatch) {
    std::fprintf(stderr,
                 "bench_oracle: correctly rounded outputs differ between the oracle and the naive implementation\n");
    return 1;
  }
  return 0;
}
