// Speed of the CPU attention kernels (kernels/cpu/attention_*.cpp) at decode (n_q = 1, n_kv = 4096) and prefill
// (n_q = n_kv = 512, causal), 8 heads, head dim 128, against a plain-fp32 implementation with A1's loop order
// (blocks of 64 keys descending, online softmax, no roundings, std::exp in float). Counter x_plain_fp32 =
// kernel time / plain-fp32 time in thread CPU time (robust on a shared machine; target for the fp16/bf16-in,
// fp32-accumulate kernels: <= 3).
// Run: build/bench/kvconf_bench_kernels --benchmark_filter=attn/
#include <benchmark/benchmark.h>

#include <algorithm>
#include <ctime>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/kernels/registry.hpp"

namespace {

using kvconf::Format;
using kvconf::kernels::AttentionCall;
using kvconf::kernels::AttentionKernel;

struct Problem {
  std::string name;
  AttentionCall call;
  std::vector<float> q, k, v;  // q: (n_q, heads, d); k: (n_kv, heads, d); v: (n_kv, heads, d) as floats of `fmt`
  std::vector<float> out;      // (n_q, heads, d)
};

Problem make(const std::string& name, std::size_t n_q, std::size_t n_kv, Format f) {
  Problem p;
  p.name = name;
  p.call.shape = {n_q, n_kv, 8, 8, 128, 128};
  p.call.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  p.call.params.scale = static_cast<float>(1.0 / std::sqrt(128.0));
  std::mt19937 g(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, std::size_t n) {
    x.resize(n);
    for (float& e : x) e = kvconf::kernels::round_float(f, nd(g));
  };
  fill(p.q, n_q * 8 * 128);
  fill(p.k, n_kv * 8 * 128);
  fill(p.v, n_kv * 8 * 128);
  p.out.resize(n_q * 8 * 128);
  return p;
}

Problem& problem(bool decode, Format f) {
  static std::map<std::pair<bool, Format>, Problem> cache;
  auto it = cache.find({decode, f});
  if (it == cache.end())
    it = cache
             .emplace(std::make_pair(decode, f),
                      decode ? make("decode_nkv4096", 1, 4096, f) : make("prefill_n512", 512, 512, f))
             .first;
  return it->second;
}

// Plain fp32 attention with A1's loop order: for each head and row, KV blocks of 64 descending, scores by a
// plain dot loop, online softmax with std::exp(float), P·V accumulated in fp32, o = acc / l.
void plain_fp32(Problem& p) {
  const auto& sh = p.call.shape;
  const std::size_t H = sh.n_heads, d = sh.d, bc = 64;
  const float scale = static_cast<float>(p.call.params.scale);
  std::vector<float> s(bc), acc(d);  // (bc), (d)
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = 0; i < sh.n_q; ++i) {
      const float* q = p.q.data() + (i * H + h) * d;
      const std::size_t hi = static_cast<std::size_t>(p.call.params.q_offset) + i + 1;
      std::fill(acc.begin(), acc.end(), 0.0f);
      float m = -INFINITY, l = 0.0f;
      for (std::size_t b = (hi - 1) / bc + 1; b-- > 0;) {
        const std::size_t j0 = b * bc, j1 = std::min(hi, j0 + bc);
        float mb = -INFINITY;
        for (std::size_t j = j0; j < j1; ++j) {
          const float* k = p.k.data() + (j * H + h) * d;
          float x = 0.0f;
          for (std::size_t t = 0; t < d; ++t) x += q[t] * k[t];
          s[j - j0] = x * scale;
          mb = std::max(mb, s[j - j0]);
        }
        const float mn = std::max(m, mb);
        const float alpha = std::exp(m - mn);
        l *= alpha;
        for (float& a : acc) a *= alpha;
        m = mn;
        for (std::size_t j = j0; j < j1; ++j) {
          const float e = std::exp(s[j - j0] - m);
          l += e;
          const float* v = p.v.data() + (j * H + h) * d;
          for (std::size_t c = 0; c < d; ++c) acc[c] += e * v[c];
        }
      }
      float* o = p.out.data() + (i * H + h) * d;
      for (std::size_t c = 0; c < d; ++c) o[c] = acc[c] / l;
    }
}

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU seconds per plain-fp32 run of a problem (best of 3, measured once).
double plain_seconds(bool decode) {
  static std::map<bool, double> cache;
  if (auto it = cache.find(decode); it != cache.end()) return it->second;
  Problem& p = problem(decode, Format::fp16);
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const double t0 = cpu_now();
    plain_fp32(p);
    benchmark::DoNotOptimize(p.out.data());
    best = std::min(best, cpu_now() - t0);
  }
  return cache[decode] = best;
}

void bm_plain(benchmark::State& state, bool decode) {
  Problem& p = problem(decode, Format::fp16);
  for (auto _ : state) {
    plain_fp32(p);
    benchmark::DoNotOptimize(p.out.data());
  }
}

void bm_kernel(benchmark::State& state, const AttentionKernel* k, bool decode) {
  Problem& p = problem(decode, k->info.in);
  if (auto r = k->supports(p.call)) {
    state.SkipWithError(r->c_str());
    return;
  }
  state.SetLabel(k->pipeline(p.call).name);
  const double t0 = cpu_now();
  for (auto _ : state) {
    k->run(p.call, p.q, p.k, p.v, p.out);
    benchmark::DoNotOptimize(p.out.data());
  }
  const double per = (cpu_now() - t0) / static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["x_plain_fp32"] = per / plain_seconds(decode);
}

const kvconf::kernels::Registry& registry() {
  static const kvconf::kernels::Registry r = kvconf::kernels::cpu_registry();
  return r;
}

const bool registered = [] {
  for (const bool decode : {true, false}) {
    const std::string shape = decode ? "decode_nkv4096_d128" : "prefill_n512_d128";
    benchmark::RegisterBenchmark(("attn/plain_fp32/" + shape).c_str(), bm_plain, decode)->Unit(benchmark::kMillisecond);
    for (const AttentionKernel& k : registry().attention())
      benchmark::RegisterBenchmark(("attn/" + k.info.name + "/" + shape).c_str(), bm_kernel, &k, decode)
          ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
