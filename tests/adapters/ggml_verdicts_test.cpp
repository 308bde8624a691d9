// kvconf's verdict beside ggml's own (issue 23, docs/LLAMA_CPP.md "Two judges"): for every ggml kernel of
// libkvconf_ggml_plugin.so and every fast GEMM / RMSNorm case, kvconf's oracle rule (error, bound) and the NMSE that
// llama.cpp's test-backend-ops computes (Σ(y − ref)² / Σ ref², ref the oracle's value on the same inputs) against its
// threshold for the op (mul_mat 5e-4, rms_norm the default 1e-7); then one planted bug in a copy of the plugin's call
// path — a decode-only fast path that truncates the activations to bf16 (dropping their low 16 bits, as a cheap
// f32→bf16 cast does) — and which of the two judges catches it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/kernels/plugin.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/norm.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf {
namespace {

using conformance::Data;
using results::all_pass;
using results::CheckResults;
using results::describe;

const kernels::Registry& ggml() {
  static const kernels::Registry r = kernels::plugin_registry({KVCONF_GGML_PLUGIN});
  return r;
}

// test-backend-ops' nmse(): Σ(ref − y)² / Σ ref².
double nmse(const std::vector<double>& ref, const std::vector<float>& y) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) num += (ref[i] - y[i]) * (ref[i] - y[i]), den += ref[i] * ref[i];
  return num / den;
}

std::vector<double> wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The kernel's output on the case's shape and data kind, and its NMSE against the oracle's value (reference/: exact,
// rounded to the nearest double) on the same inputs.
double gemm_nmse(const kernels::GemmKernel& k, const conformance::GemmCase& c) {
  const auto& s = c.shape;
  const std::vector<float> x = conformance::make_values(s.m * s.k, k.info.in, c.data, 11);  // (m, k)
  const std::vector<float> w = conformance::make_values(s.n * s.k, k.info.in, c.data, 12);  // (n, k)
  std::vector<float> y(s.m * s.n);                                                          // (m, n)
  k.run(s, x, w, y);
  return nmse(ref::project(wide(x), wide(w), s.m, s.k, s.n, k.info.in).approx, y);
}

double norm_nmse(const kernels::NormKernel& k, const conformance::NormCase& c) {
  const auto& s = c.shape;
  const std::vector<float> x = conformance::make_values(s.rows * s.d, k.info.in, c.data, 13);  // (rows, d)
  const std::vector<float> w = conformance::make_values(s.d, k.info.in, Data::normal, 14);     // (d)
  std::vector<float> y(s.rows * s.d);
  k.run(s, c.params, x, w, y);
  return nmse(ref::rms_norm(wide(x), wide(w), s.rows, s.d, c.params.eps, c.params.one_plus_weight, k.info.in).approx,
              y);
}

// q and K scaled by 1/4 to keep fp16 scores moderate; only the cache's filled rows reach the oracle.
double attention_nmse(const kernels::AttentionKernel& k, const conformance::AttentionCase& c) {
  const auto& s = c.call.shape;
  const std::size_t cap = c.call.cap();
  const std::vector<float> q = conformance::make_values(s.n_q * s.n_heads * s.d, k.info.in, c.data, 15, 0x1p-2);
  const std::vector<float> kc = conformance::make_values(cap * s.n_kv_heads * s.d, k.info.in, c.data, 16, 0x1p-2);
  const std::vector<float> vc = conformance::make_values(cap * s.n_kv_heads * s.d_v, k.info.in, Data::normal, 17);
  std::vector<float> y(s.n_q * s.n_heads * s.d_v);  // (n_q, H, d_v)
  k.run(c.call, q, kc, vc, y);
  const std::vector<double> kd(kc.begin(), kc.begin() + static_cast<std::ptrdiff_t>(s.n_kv * s.n_kv_heads * s.d));
  const std::vector<double> vd(vc.begin(), vc.begin() + static_cast<std::ptrdiff_t>(s.n_kv * s.n_kv_heads * s.d_v));
  return nmse(ref::attention(wide(q), kd, vd, s, c.call.params, k.info.in).approx, y);
}

constexpr double kMulMatNmse = 5e-4;   // test-backend-ops: test_mul_mat::max_nmse_err()
constexpr double kDefaultNmse = 1e-7;  // test-backend-ops: test_case::max_nmse_err() (rms_norm keeps it)
constexpr double kFlashNmse = 5e-4;    // test-backend-ops: test_flash_attn_ext::max_nmse_err()

TEST(GgmlVerdicts, CorrectKernelsPassBothJudges) {
  ASSERT_EQ(ggml().gemm().size(), 2u);
  ASSERT_EQ(ggml().norm().size(), 1u);
  for (const kernels::GemmKernel& k : ggml().gemm())
    for (const conformance::GemmCase& c : conformance::gemm_cases()) {
      if (c.slow) continue;
      const CheckResults r = conformance::check_gemm_matches_oracle(k, c, 1);
      const double e = gemm_nmse(k, c);
      EXPECT_TRUE(all_pass(r)) << k.info.name << " " << c.id() << ": " << describe(r);
      EXPECT_LE(e, kMulMatNmse) << k.info.name << " " << c.id();
      std::printf("%-40s %-28s kvconf %s error %.3g bound %.3g | ggml NMSE %.3g (<= %.0e)\n", k.info.name.c_str(),
                  c.id().c_str(), r[0].pass ? "pass" : "FAIL", r[0].error, r[0].bound, e, kMulMatNmse);
    }
  const kernels::AttentionKernel* soft = ggml().find_attention("plugin.kvconf_ggml_plugin.attn.soft_max.f16");
  ASSERT_NE(soft, nullptr);
  for (const conformance::AttentionCase& c : conformance::attention_cases()) {
    if (c.slow || soft->supports(c.call)) continue;
    const CheckResults r = conformance::check_attention_matches_oracle(*soft, c, 1);
    const double e = attention_nmse(*soft, c);
    EXPECT_TRUE(all_pass(r)) << soft->info.name << " " << c.id() << ": " << describe(r);
    EXPECT_LE(e, kFlashNmse) << soft->info.name << " " << c.id();
    std::printf("%-40s %-28s kvconf %s error %.3g bound %.3g | ggml NMSE %.3g (<= %.0e)\n", soft->info.name.c_str(),
                c.id().c_str(), r[0].pass ? "pass" : "FAIL", r[0].error, r[0].bound, e, kFlashNmse);
  }
  for (const kernels::NormKernel& k : ggml().norm())
    for (const conformance::NormCase& c : conformance::norm_cases()) {
      if (c.slow) continue;
      const CheckResults r = conformance::check_norm_matches_oracle(k, c, 1);
      const double e = norm_nmse(k, c);
      EXPECT_TRUE(all_pass(r)) << k.info.name << " " << c.id() << ": " << describe(r);
      EXPECT_LE(e, kDefaultNmse) << k.info.name << " " << c.id();
      std::printf("%-40s %-28s kvconf %s error %.3g bound %.3g | ggml NMSE %.3g (<= %.0e)\n", k.info.name.c_str(),
                  c.id().c_str(), r[0].pass ? "pass" : "FAIL", r[0].error, r[0].bound, e, kDefaultNmse);
    }
}

// x's low 16 bits dropped: bf16 by truncation (toward zero), as a cheap f32→bf16 cast does.
float truncate_bf16(float v) { return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0xffff0000u); }

// The planted bug: ggml's mul_mat.f32 called through a decode fast path (M = 1) that truncates the activations to
// bf16 first; prefill calls (M > 1) are untouched.
kernels::GemmKernel decode_bf16_truncated(const kernels::GemmKernel& base) {
  kernels::GemmKernel k = base;
  k.info.name = "ggml.mutant.mul_mat.decode_bf16_truncated";
  k.run = [base](const kernels::GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    if (s.m != 1) return base.run(s, x, w, y);
    std::vector<float> xt(x.begin(), x.end());
    for (float& v : xt) v = truncate_bf16(v);
    base.run(s, xt, w, y);
  };
  return k;
}

// kvconf catches the decode-only truncation (the oracle rule on a same-sign decode case, the cache ON vs OFF rule on
// a projection whose decode row takes the fast path); test-backend-ops' NMSE stays under its mul_mat threshold on
// every decode case (a bias of ~2^-9 relative gives an NMSE of ~4e-6).
TEST(GgmlVerdicts, PlantedDecodeTruncationIsCaughtByKvconfNotByNmse) {
  const kernels::GemmKernel* base = ggml().find_gemm("plugin.kvconf_ggml_plugin.mul_mat.f32");
  ASSERT_NE(base, nullptr);
  const kernels::GemmKernel bad = decode_bf16_truncated(*base);
  std::size_t kvconf_fails = 0, nmse_fails = 0, decode_cases = 0;
  for (const conformance::GemmCase& c : conformance::gemm_cases()) {
    if (c.slow || c.shape.m != 1) continue;
    ++decode_cases;
    const CheckResults r = conformance::check_gemm_matches_oracle(bad, c, 1);
    const double e = gemm_nmse(bad, c);
    kvconf_fails += !all_pass(r);
    nmse_fails += e > kMulMatNmse;
    std::printf("planted %-28s kvconf %s error %.3g bound %.3g | ggml NMSE %.3g (<= %.0e: %s)\n", c.id().c_str(),
                all_pass(r) ? "pass" : "FAIL", r[0].error, r[0].bound, e, kMulMatNmse,
                e > kMulMatNmse ? "FAIL" : "pass");
  }
  std::size_t on_off_fails = 0, projections = 0;
  for (const conformance::ProjectionCase& c : conformance::projection_cases()) {
    ++projections;
    const CheckResults r = conformance::check_projection_cache_on_off(bad, c, 1);
    on_off_fails += !all_pass(r);
    std::printf("planted projection %-24s %s\n", c.id().c_str(), describe(r).c_str());
  }
  EXPECT_GT(decode_cases, 0u);
  EXPECT_GT(kvconf_fails + on_off_fails, 0u) << "kvconf did not catch the decode-only truncation";
  EXPECT_EQ(nmse_fails, 0u) << "ggml's NMSE threshold caught it too: the comparison no longer shows a difference";
  std::printf(
      "decode-only bf16 truncation: kvconf oracle rule fails %zu of %zu decode cases, cache ON/OFF rule %zu "
      "of %zu projections; NMSE over %.0e on %zu of %zu\n",
      kvconf_fails, decode_cases, on_off_fails, projections, kMulMatNmse, nmse_fails, decode_cases);
}

// ggml's CPU flash attention over an f16 V accumulates P·V in an fp16 accumulator, key by key (ggml-cpu/ops.cpp:
// VKQ16, ggml_vec_mad_f16 and ggml_vec_scale_f16): outside the plugin ABI's black-box bound, which takes fp32
// accumulation (ABI version 1 cannot declare another). An explicit expectation: the kernel as the ABI describes it
// fails the oracle bound on fast cases it runs (the finding, with its counts reported each run; this test fails when
// ggml changes it), and described as it computes (PV accumulated in fp16, each step one rounding of acc + v·p), it
// passes on every one.
TEST(GgmlVerdicts, FlashAttnExtAccumulatesPvInFp16) {
  const kernels::AttentionKernel* flash = ggml().find_attention("plugin.kvconf_ggml_plugin.attn.flash_attn_ext.f16");
  ASSERT_NE(flash, nullptr);
  kernels::AttentionKernel described = *flash;
  described.pipeline = [base = *flash](const kernels::AttentionCall& call) {
    ref::AttentionPipeline p = base.pipeline(call);
    p.pv_spec = {Format::fp16, Format::fp16, Format::fp32, true};
    p.p_cast = std::nullopt;  // exp(s − M) stays a float; the product is formed in fp32 and added in fp16
    p.name += " + fp16 PV accumulator";
    return p;
  };
  // The rule a result list holds under `name`.
  const auto rule = [](const CheckResults& r, const std::string& name) {
    for (const results::CheckResult& x : r)
      if (x.rule == name) return x;
    ADD_FAILURE() << "no rule " << name << " in " << describe(r);
    return results::CheckResult{};
  };
  std::size_t ran = 0, failed_as_declared = 0, failed_described = 0, two_sided_failed = 0;
  double worst = 0.0, worst_described = 0.0, worst_two_sided = 0.0, worst_nmse = 0.0;
  for (const conformance::AttentionCase& c : conformance::attention_cases()) {
    if (c.slow || flash->supports(c.call)) continue;
    ++ran;
    const results::CheckResult a = rule(conformance::check_attention_matches_oracle(*flash, c, 1), "oracle_bound");
    const CheckResults rb = conformance::check_attention_matches_oracle(described, c, 1);
    const results::CheckResult b = rule(rb, "oracle_bound"), t = rule(rb, "two_sided");
    const double e = attention_nmse(*flash, c);
    worst_nmse = std::max(worst_nmse, e);
    EXPECT_LE(e, kFlashNmse) << c.id();
    failed_as_declared += !a.pass;
    failed_described += !b.pass;
    two_sided_failed += !t.pass;
    worst = std::max(worst, a.error / a.bound);
    worst_described = std::max(worst_described, b.error / b.bound);
    worst_two_sided = std::max(worst_two_sided, t.error / t.bound);
    EXPECT_TRUE(b.pass) << c.id() << ": " << b.detail;
  }
  ASSERT_GT(ran, 0u);
  // Measured with llama.cpp 0c1e570: 11 of 14 fail as declared (error/bound up to 5.7), none described.
  EXPECT_GT(failed_as_declared, 0u) << "ggml's flash attention now passes the fp32-accumulation bound: the fp16 "
                                       "accumulator is gone, update docs/LLAMA_CPP.md and this expectation";
  std::printf(
      "flash_attn_ext over an f16 cache, %zu fast cases: oracle_bound as the ABI declares it (fp32 "
      "accumulation) fails %zu, largest error/bound %.2f; with the fp16 PV accumulator described, fails %zu, "
      "largest error/bound %.2f; two_sided (error <= 2-3x a naive fp32 reference's) fails %zu, largest %.1f\n",
      ran, failed_as_declared, worst, failed_described, worst_described, two_sided_failed, worst_two_sided);
  std::printf("  test-backend-ops' judge on the same cases: largest NMSE %.3g, under flash attention's %.0e on all\n",
              worst_nmse, kFlashNmse);
}

}  // namespace
}  // namespace kvconf
