// Cuda/AttentionKernelsConformance.AgreeWithinBounds/<case_id> (label gpu): the CUDA attention kernels against each
// other and against the CPU emulation A1 (cpu.attn.a1_flash2.*) of the same format, on the prefill call of every
// fast attention case and on its decode call (the last row alone). GPU exp is not bit-specified, so no bitwise
// claim is made across kernels: each pair must agree elementwise within B_a + B_b, the sum of the two paths'
// a-priori bounds against the oracle (|a − b| <= |a − x| + |x − b|; reference/attention_pipeline.hpp). Without a
// usable device every case skips with gpu_unavailable()'s reason.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/kernels/gpu.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::conformance {
namespace {

using kernels::AttentionCall;
using kernels::AttentionKernel;

std::vector<double> to_double(std::span<const float> x) { return {x.begin(), x.end()}; }

// The decode call of a case: its last query row alone, over the keys filled up to it, same capacity.
AttentionCall decode_of(const AttentionCall& full) {
  AttentionCall c = full;
  c.shape.n_q = 1;
  c.params.q_offset = full.params.q_offset + static_cast<std::int64_t>(full.shape.n_q) - 1;
  if (full.params.causal) c.shape.n_kv = static_cast<std::size_t>(c.params.q_offset) + 1;
  c.capacity = full.cap();
  return c;
}

struct Output {
  const AttentionKernel* kernel = nullptr;
  std::vector<float> o;       // (n_q, H, d_v)
  std::vector<double> bound;  // (n_q, H, d_v) per-element a-priori bound of the kernel's path
};

// Every kernel of `kernels` that supports `call`, run on the same inputs, with its bounds from the oracle.
// q: (n_q, H, d); k: (cap, Hkv, d); v: (cap, Hkv, d_v).
std::string compare(const std::vector<const AttentionKernel*>& kernels, Format f, const AttentionCall& call,
                    const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                    const std::string& what, std::size_t& pairs) {
  const auto& s = call.shape;
  const auto kd = to_double(std::span<const float>(k).first(s.n_kv * s.n_kv_heads * s.d));
  const auto vd = to_double(std::span<const float>(v).first(s.n_kv * s.n_kv_heads * s.d_v));
  ref::OracleOptions opt;
  opt.out = f;
  const ref::AttentionResult r = ref::attention(to_double(q), kd, vd, s, call.params, f, opt);
  std::vector<Output> outs;
  for (const AttentionKernel* kern : kernels) {
    if (kern->supports(call)) continue;
    Output o;
    o.kernel = kern;
    o.o.assign(s.n_q * s.n_heads * s.d_v, 0.0f);
    kern->run(call, q, k, v, o.o);
    const ref::AttentionPipeline pipe = kern->pipeline(call);
    o.bound.resize(o.o.size());
    for (std::size_t i = 0; i < s.n_q; ++i)
      for (std::size_t h = 0; h < s.n_heads; ++h)
        for (std::size_t c = 0; c < s.d_v; ++c)
          o.bound[(i * s.n_heads + h) * s.d_v + c] =
              ref::attention_pipeline_bound(pipe, call.params, ref::element_stats(r, vd, s, call.params, i, h, c));
    outs.push_back(std::move(o));
  }
  std::string failures;
  for (std::size_t a = 0; a < outs.size(); ++a)
    for (std::size_t b = a + 1; b < outs.size(); ++b) {
      ++pairs;
      std::size_t over = 0, worst = 0;
      double worst_ratio = 0.0;
      for (std::size_t e = 0; e < outs[a].o.size(); ++e) {
        const double x = outs[a].o[e], y = outs[b].o[e];
        const double diff = std::fabs(x - y), lim = outs[a].bound[e] + outs[b].bound[e];
        const bool ok = std::isfinite(x) && std::isfinite(y) && diff <= lim;
        if (!ok) ++over;
        const double ratio = ok ? (lim > 0 ? diff / lim : 0.0) : INFINITY;
        if (ratio > worst_ratio || (!ok && over == 1)) {
          worst_ratio = ratio;
          worst = e;
        }
      }
      std::printf("%s %s vs %s: worst |a-b|/(Ba+Bb) = %.3g\n", what.c_str(), outs[a].kernel->info.name.c_str(),
                  outs[b].kernel->info.name.c_str(), worst_ratio);
      if (over > 0) {
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "%s: %s vs %s: %zu elements over Ba+Bb; element %zu: a=%.9g b=%.9g Ba=%.3g Bb=%.3g\n",
                      what.c_str(), outs[a].kernel->info.name.c_str(), outs[b].kernel->info.name.c_str(), over, worst,
                      static_cast<double>(outs[a].o[worst]), static_cast<double>(outs[b].o[worst]),
                      outs[a].bound[worst], outs[b].bound[worst]);
        failures += buf;
      }
    }
  return failures;
}

std::vector<AttentionCase> fast_cases() {
  std::vector<AttentionCase> v;
  for (const AttentionCase& c : attention_cases())
    if (!c.slow) v.push_back(c);
  return v;
}

class AttentionKernelsConformance : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionKernelsConformance, AgreeWithinBounds) {
  if (auto why = kernels::gpu_unavailable()) GTEST_SKIP() << *why;
  const AttentionCase& c = GetParam();
  const std::uint64_t seed = seed_for("gpu_attention_agreement", c.id());
  static const kernels::Registry gpu = kernels::gpu_registry();
  static const kernels::Registry cpu = kernels::cpu_registry();
  std::size_t pairs = 0;
  std::string failures;
  for (const Format f : {Format::fp16, Format::fp32}) {
    std::vector<const AttentionKernel*> ks;
    for (const AttentionKernel& k : gpu.attention())
      if (k.info.backend == "cuda" && k.info.in == f) ks.push_back(&k);
    ks.push_back(cpu.find_attention(f == Format::fp16 ? "cpu.attn.a1_flash2.f16" : "cpu.attn.a1_flash2.f32"));
    // Inputs as the conformance checks draw them: adversarial kinds shape q and k, V stays N(0,1) for them.
    const auto& s = c.call.shape;
    const double qk_scale = c.data == Data::wide_range ? 0x1p-4 : 1.0;
    const Data v_data = (c.data == Data::near_exp_overflow || c.data == Data::p_flush) ? Data::normal : c.data;
    const auto q = make_values(s.n_q * s.n_heads * s.d, f, c.data, seed ^ 1, qk_scale);
    const auto k = make_values(c.call.cap() * s.n_kv_heads * s.d, f, c.data, seed ^ 2, qk_scale);
    const auto v = make_values(c.call.cap() * s.n_kv_heads * s.d_v, f, v_data, seed ^ 3);
    const std::string tag = std::string(f == Format::fp16 ? "f16" : "f32") + " seed=" + std::to_string(seed);
    failures += compare(ks, f, c.call, q, k, v, "prefill " + tag, pairs);
    const AttentionCall dec = decode_of(c.call);
    const std::size_t row = s.n_heads * s.d;
    const std::vector<float> q_last(q.end() - static_cast<std::ptrdiff_t>(row), q.end());
    failures += compare(ks, f, dec, q_last, k, v, "decode " + tag, pairs);
  }
  ::testing::Test::RecordProperty("pairs", std::to_string(pairs));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  if (pairs == 0) GTEST_SKIP() << "no two kernels support case " << c.id();
  EXPECT_TRUE(failures.empty()) << "case " << c.id() << ":\n" << failures;
}

std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) {
  std::string n = info.param.id();
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Cuda, AttentionKernelsConformance, ::testing::ValuesIn(fast_cases()), case_name);

}  // namespace
}  // namespace kvconf::conformance
