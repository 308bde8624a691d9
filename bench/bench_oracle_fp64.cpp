// The oracle's attention beside a plain scalar fp64 attention loop on the same inputs and shapes (issue 35: the
// oracle should cost <= 2x that loop), with the ratio printed from the same run (CPU time), and check_values on
// q, k, v timed alone (the standard path's up-front check; decode takes the fused path, which checks K and V while
// converting them: docs/TOLERANCES.md "Cost of the oracle"). Shapes as bench_oracle.cpp: decode (1 query,
// n_kv = 4096, d = 128) and a causal prefill block (n = 512, d = 128), one head, fp16 in, fp16 out, scale 1/sqrt(d).
// Run: build/bench/kvconf_bench_oracle_fp64 --benchmark_repetitions=5   (the summary uses medians when repeated)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kvconf/numerics/rounding.hpp"
#include "oracle_bench.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_detail.hpp"

namespace {

using kvconf::Format;
namespace ref = kvconf::ref;

struct Problem {
  const char* name;
  ref::AttentionShape sh;
  ref::AttentionParams pr;
  std::vector<double> q, k, v;  // q: (n_q, 1, d), k: (n_kv, 1, d), v: (n_kv, 1, d), fp16 values
  std::vector<double> approx;   // (n_q, 1, d) the oracle's exact result rounded to double, computed once
  std::vector<double> s, out;   // the fp64 loop's scratch (n_kv) and output (n_q, d), allocated once with the inputs
};

using kvconf::bench::randn_fp16;

Problem make(const char* name, std::size_t n_q, std::size_t n_kv, std::size_t d, std::uint64_t seed) {
  Problem p{name, {n_q, n_kv, 1, 1, d, d}, {}, {}, {}, {}, {}, {}, {}};
  p.pr.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  p.pr.causal = true;
  p.pr.scale = 1.0 / std::sqrt(static_cast<double>(d));
  p.q = randn_fp16(n_q * d, seed);
  p.k = randn_fp16(n_kv * d, seed + 1);
  p.v = randn_fp16(n_kv * d, seed + 2);
  p.s.assign(n_kv, 0.0);
  p.out.assign(n_q * d, 0.0);
  return p;
}

ref::OracleOptions options() {
  ref::OracleOptions o;
  o.out = Format::fp16;
  return o;
}

// The plain loop: per query row, scores in fp64 (sequential dot), max, exp, sum, P·V, one division per column.
// s: (n_kv) scratch; out: (n_q, d).
void fp64_attention(const Problem& p, std::vector<double>& s, std::vector<double>& out) {
  const std::size_t d = p.sh.d;
  for (std::size_t i = 0; i < p.sh.n_q; ++i) {
    const std::size_t nv = static_cast<std::size_t>(p.pr.q_offset) + i + 1;  // causal: keys 0..pos
    const double* q = p.q.data() + i * d;
    double m = -HUGE_VAL;
    for (std::size_t j = 0; j < nv; ++j) {
      const double* k = p.k.data() + j * d;
      double acc = 0.0;
      for (std::size_t t = 0; t < d; ++t) acc += q[t] * k[t];
      s[j] = acc * p.pr.scale;
      m = std::max(m, s[j]);
    }
    double sum = 0.0;
    for (std::size_t j = 0; j < nv; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    double* o = out.data() + i * d;
    std::fill(o, o + d, 0.0);
    for (std::size_t j = 0; j < nv; ++j) {
      const double* v = p.v.data() + j * d;
      for (std::size_t c = 0; c < d; ++c) o[c] += s[j] * v[c];
    }
    for (std::size_t c = 0; c < d; ++c) o[c] /= sum;
  }
}

void bm_fp64(benchmark::State& state, Problem* p) {
  std::vector<double>& out = p->out;
  for (auto _ : state) {
    fp64_attention(*p, p->s, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Same inputs as the oracle: the loop's answer must be close to the oracle's exact one.
  double worst = 0.0;
  for (std::size_t t = 0; t < out.size(); ++t) worst = std::max(worst, std::fabs(out[t] - p->approx[t]));
  state.counters["max_abs_diff_vs_oracle"] = worst;
  if (!(worst < 1e-9)) state.SkipWithError("the fp64 loop disagrees with the oracle: not the same problem");
}

void bm_oracle(benchmark::State& state, const Problem* p) {
  int max_prec = 0;
  for (auto _ : state) {
    auto r = ref::attention(p->q, p->k, p->v, p->sh, p->pr, Format::fp16, options());
    benchmark::DoNotOptimize(r.out.data());
    for (const auto& st : r.rows) max_prec = std::max(max_prec, st.precision_bits);
  }
  state.counters["max_precision_bits"] = max_prec;
}

// check_values on q, k and v alone (the standard path's up-front check).
void bm_check_values(benchmark::State& state, const Problem* p) {
  for (auto _ : state) {
    int lo = 0;
    for (const auto* x : {&p->q, &p->k, &p->v}) lo += ref::detail::check_values("bench", "x", *x, Format::fp16).lo;
    benchmark::DoNotOptimize(lo);
  }
}

// Console output plus, per benchmark, the median CPU time when repeated (else the run's own), for the summary.
class Reporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> seconds, median;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const double t = r.GetAdjustedCPUTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
      if (r.run_type == Run::RT_Iteration) seconds[r.run_name.function_name] = t;
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median") median[r.run_name.function_name] = t;
    }
  }
  double get(const std::string& n) const {
    if (const auto it = median.find(n); it != median.end()) return it->second;
    if (const auto it = seconds.find(n); it != seconds.end()) return it->second;
    return -1.0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  static auto [decode, prefill] = kvconf::bench::make_decode_and_prefill(make);  // the shapes both benchmarks time
  for (Problem* p : {&decode, &prefill})
    p->approx = ref::attention(p->q, p->k, p->v, p->sh, p->pr, Format::fp16, options()).approx;
  for (Problem* p : {&decode, &prefill}) {
    const std::string n = p->name;
    benchmark::RegisterBenchmark(("fp64_loop/" + n).c_str(), bm_fp64, p)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("oracle/" + n).c_str(), bm_oracle, p)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("check_values/" + n).c_str(), bm_check_values, p)->Unit(benchmark::kMillisecond);
  }
  Reporter rep;
  if (!kvconf::bench::run_benchmarks(argc, argv, rep)) return 2;
  for (const char* n : {decode.name, prefill.name}) {
    const double f = rep.get(std::string("fp64_loop/") + n), o = rep.get(std::string("oracle/") + n);
    const double val = rep.get(std::string("check_values/") + n);
    if (f > 0 && o > 0)
      std::printf("ratio %-20s oracle %8.3f ms  fp64 loop %8.3f ms  => %5.2fx (goal <= 2x)  check_values %6.3f ms\n", n,
                  o * 1e3, f * 1e3, o / f, val * 1e3);
  }
  return 0;
}
