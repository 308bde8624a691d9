// What judging a black-box kernel costs: the same conformance checks (oracle accuracy and cache-ON vs cache-OFF) and
// the same bare decode call, on fp16 attention and fp16 GEMM, for a CPU emulation (cpu.attn.a6_eager.f16,
// cpu.gemm.g1.f16), PyTorch's kernel through libtorch (torch.attn.sdpa_flash.f16, torch.gemm.linear.f16) and the
// example plugin's kernel through its isolated worker process (plugin...attn.two_pass.f16, plugin...gemm.f16).
// Counter x_cpu = wall time / the CPU kernel's wall time in the same benchmark (wall time: the plugin
// worker computes in another process, whose CPU time this process does not see; "CPU" is this process's own).
// Run: build/bench/kvconf_bench_blackbox [--benchmark_filter=check_]
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/kernels/plugin.hpp"
#include "kvconf/kernels/torch.hpp"

namespace {

using namespace kvconf;
using namespace kvconf::conformance;

const kernels::Registry& reg() {
  static const kernels::Registry r = [] {
    kernels::Registry all = kernels::torch_registry();
    const kernels::Registry cpu = kernels::cpu_registry();
    for (const auto& k : cpu.attention()) all.add(k);
    for (const auto& k : cpu.gemm()) all.add(k);
    kernels::register_plugin_kernels(all, KVCONF_EXAMPLE_PLUGIN);
    return all;
  }();
  return r;
}

const char* kAttn[] = {"cpu.attn.a6_eager.f16", "torch.attn.sdpa_flash.f16",
                       "plugin.kvconf_example_plugin.attn.two_pass.f16"};
const char* kGemm[] = {"cpu.gemm.g1.f16", "torch.gemm.linear.f16", "plugin.kvconf_example_plugin.gemm.f16"};

AttentionCase attn_case() {
  AttentionCase c;
  c.call.shape = {8, 512, 8, 2, 128, 128};
  c.call.params.q_offset = 504;
  c.call.params.causal = true;
  c.call.params.scale = static_cast<double>(static_cast<float>(1.0 / std::sqrt(128.0)));
  return c;
}

ProjectionCase proj_case() {
  ProjectionCase c;
  c.prompt = 8;
  c.total = 16;
  c.n = 256;
  c.k = 4096;
  return c;
}

// The time of the CPU kernel's run of the same benchmark, for x_cpu (the CPU rows run first: registration order).
std::map<std::string, double>& cpu_time() {
  static std::map<std::string, double> t;
  return t;
}

void report(benchmark::State& st, const std::string& bench, std::size_t which, double seconds_per_iter) {
  if (which == 0) cpu_time()[bench] = seconds_per_iter;
  const auto it = cpu_time().find(bench);
  if (it != cpu_time().end() && it->second > 0) st.counters["x_cpu"] = seconds_per_iter / it->second;
}

template <class Body>
void timed(benchmark::State& st, const std::string& bench, std::size_t which, Body body) {
  double total = 0.0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  report(st, bench, which, total / static_cast<double>(st.iterations()));
}

void BM_check_attention(benchmark::State& st) {
  const auto w = static_cast<std::size_t>(st.range(0));
  const kernels::AttentionKernel* k = reg().find_attention(kAttn[w]);
  if (!k) throw std::runtime_error(std::string("no kernel ") + kAttn[w]);
  const AttentionCase c = attn_case();
  st.SetLabel(kAttn[w]);
  timed(st, "check_attention", w, [&] {
    benchmark::DoNotOptimize(check_attention_matches_oracle(*k, c, 1));
    benchmark::DoNotOptimize(check_attention_cache_on_off(*k, c, 1));
  });
}

void BM_decode_attention(benchmark::State& st) {
  const auto w = static_cast<std::size_t>(st.range(0));
  const kernels::AttentionKernel* k = reg().find_attention(kAttn[w]);
  kernels::AttentionCall call = attn_case().call;
  call.shape.n_q = 1;
  call.params.q_offset = static_cast<std::int64_t>(call.shape.n_kv - 1);
  const auto& s = call.shape;
  const std::vector<float> q(s.n_heads * s.d, 0.5f), kc(s.n_kv * s.n_kv_heads * s.d, 0.25f),
      vc(s.n_kv * s.n_kv_heads * s.d_v, 1.0f);
  std::vector<float> o(s.n_heads * s.d_v);
  st.SetLabel(kAttn[w]);
  timed(st, "decode_attention", w, [&] { k->run(call, q, kc, vc, o); });
}

void BM_check_projection(benchmark::State& st) {
  const auto w = static_cast<std::size_t>(st.range(0));
  const kernels::GemmKernel* k = reg().find_gemm(kGemm[w]);
  if (!k) throw std::runtime_error(std::string("no kernel ") + kGemm[w]);
  const ProjectionCase c = proj_case();
  GemmCase g;
  g.shape = {1, c.n, c.k};
  st.SetLabel(kGemm[w]);
  timed(st, "check_projection", w, [&] {
    benchmark::DoNotOptimize(check_gemm_matches_oracle(*k, g, 1));
    benchmark::DoNotOptimize(check_projection_cache_on_off(*k, c, 1));
  });
}

void BM_decode_gemm(benchmark::State& st) {
  const auto w = static_cast<std::size_t>(st.range(0));
  const kernels::GemmKernel* k = reg().find_gemm(kGemm[w]);
  const kernels::GemmShape s{1, 256, 4096};
  const std::vector<float> x(s.k, 0.5f), wt(s.n * s.k, 0.25f);
  std::vector<float> y(s.n);
  st.SetLabel(kGemm[w]);
  timed(st, "decode_gemm", w, [&] { k->run(s, x, wt, y); });
}

BENCHMARK(BM_check_attention)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_decode_attention)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_check_projection)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_decode_gemm)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
