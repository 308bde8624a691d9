// Planted/JustPastBound.<Rule>: for every bounded conformance rule, a correct CPU kernel with one output element
// moved just past that rule's threshold (F = 1.5 times the bound, or one ulp for the bitwise rules), which the rule
// must fail. The nudge is computed here, independently of the checks, from the reference/ bounds (dot_error_bound,
// rms_norm_error_terms, attention_pipeline_bound with the oracle's element statistics) or, for the two-sided rule,
// from a naive sequential reduction written here. If any threshold in conformance/ became 100× looser (or the rule
// stopped comparing what it claims), the nudged kernel would pass and these tests fail. Each test also requires
// the reported error/bound to stay below 2F, so the plant is "just past", not a gross fault any rule would catch.
// The model rules of FlipsAreNearTies (perturbation_rounding_sized: max |z_on − z_off| <= 2S; flip_near_tie:
// |Δa| + |Δb| <= 4S at the first flip) get the same: a small random model under fp16-invariant (cache-ON equals
// cache-OFF bit for bit, so the plant is the whole difference), its decode logits moved through the engine's
// test-only hook by F times the threshold, with S (cache-OFF against fp32) computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/numerics/number_text.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/engine/sampling.hpp"
#include "random_model.hpp"  // tests/support
#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/norm.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::conformance {
namespace {

using kernels::AttentionCall;
using kernels::AttentionKernel;
using kernels::GemmKernel;
using kernels::GemmShape;
using kernels::NormKernel;

constexpr double kF = 1.5;  // how far past the bound the planted element lands

const kernels::Registry& reg() {
  static const kernels::Registry r = kernels::cpu_registry();
  return r;
}

// y0 moved by delta (rounded to the kernel's output format), or to its next value away from zero (one ulp).
float moved(Format out, float y0, double delta) {
  return static_cast<float>(round_to(out, static_cast<double>(y0) + delta));
}
// The next value of `out` away from zero (sign-magnitude encodings: the bit pattern plus one).
float next_ulp(Format out, float y0) {
  return static_cast<float>(decode(out, encode(out, static_cast<double>(y0)) + 1));
}

// The rule's result in a check's results (exactly one expected).
const CheckResult& result(const CheckResults& rs, const std::string& rule) {
  const CheckResult* hit = nullptr;
  for (const auto& r : rs)
    if (r.rule == rule) hit = &r;
  if (!hit) throw std::runtime_error("no result for rule " + rule + " in:\n" + describe(rs));
  return *hit;
}

void expect_just_past(const CheckResult& r) {
  EXPECT_FALSE(r.pass) << "the planted element passed: " << r.rule << " error=" << r.error << " bound=" << r.bound
                       << " " << r.detail;
  EXPECT_GT(r.bound, 0.0) << r.detail;
  EXPECT_LT(r.error, 2.0 * kF * r.bound) << "planted further past the bound than intended: " << r.detail;
  ::testing::Test::RecordProperty(r.rule + "_error", num_measured(r.error));
  ::testing::Test::RecordProperty(r.rule + "_bound", num_measured(r.bound));
  ::testing::Test::RecordProperty(r.rule + "_headroom", num_measured(r.headroom));
}

void expect_bitwise_caught(const CheckResult& r) {
  EXPECT_FALSE(r.pass) << "a one-ulp difference passed the bitwise rule " << r.rule << ": " << r.detail;
  EXPECT_GT(r.error, 0.0);
  ::testing::Test::RecordProperty(r.rule + "_error", num_measured(r.error));
}

// --- GEMM ----------------------------------------------------------------------------------------
// The a-priori bound of y[0] (row 0, output 0) of one call, from ref::dot_error_bound for the kernel's path.
double gemm_bound0(const GemmKernel& base, const GemmShape& s, std::span<const float> x, std::span<const float> w) {
  double sum_abs = 0.0, max_abs = 0.0;
  for (std::size_t j = 0; j < s.k; ++j) sum_abs += std::fabs(static_cast<double>(x[j]) * w[j]);
  for (float v : x) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
  for (float v : w) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
  const kernels::GemmPath p = base.path(s);
  return ref::dot_error_bound(p.spec, p.order, s.k, sum_abs * (1.0 + 0x1p-40), max_abs);
}

// base with y[0] of the calls `when` selects replaced by nudge(shape, x, w, y[0]); claims cache_invariant as told.
GemmKernel nudged_gemm(
    const GemmKernel& base, bool invariant, std::function<bool(const GemmShape&)> when,
    std::function<float(const GemmShape&, std::span<const float>, std::span<const float>, float)> nudge) {
  GemmKernel k = base;
  k.info.name = base.info.name + ".planted";
  k.info.cache_invariant = invariant;
  k.run = [base, when, nudge](const GemmShape& s, std::span<const float> x, std::span<const float> w,
                              std::span<float> y) {
    base.run(s, x, w, y);
    if (when(s)) y[0] = nudge(s, x, w, y[0]);
  };
  return k;
}

const GemmKernel& g1_f32() { return *reg().find_gemm("cpu.gemm.g1.f32"); }

TEST(PlantedJustPastBound, GemmOracleBound) {
  const GemmKernel& base = g1_f32();
  const GemmKernel k = nudged_gemm(
      base, true, [](const GemmShape&) { return true; },
      [&](const GemmShape& s, auto x, auto w, float y0) {
        return moved(base.info.out, y0, kF * gemm_bound0(base, s, x, w));
      });
  GemmCase c;
  c.shape = {4, 32, 1024};
  const CheckResults rs = check_gemm_matches_oracle(k, c, seed_for("planted_gemm_oracle", c.id()));
  expect_just_past(result(rs, "oracle_bound"));
  EXPECT_TRUE(all_pass(check_gemm_matches_oracle(base, c, seed_for("planted_gemm_oracle", c.id()))));
}

// The two-sided rule: error at most 2 × a naive sequential same-precision GEMM's max error + one ulp at max|y|.
// The plant: 2F times that (naive computed here: fp32 FMA chain; exact: the products are exact in double and their
// double sum is within 2^-40 relative of the exact one, far below the fp32 errors measured).
TEST(PlantedJustPastBound, GemmTwoSided) {
  const GemmKernel& base = g1_f32();
  auto threshold = [](const GemmShape& s, std::span<const float> x, std::span<const float> w) {
    double naive_max = 0.0, y_max = 0.0;
    for (std::size_t r = 0; r < s.m; ++r)
      for (std::size_t o = 0; o < s.n; ++o) {
        float acc = 0.0f;
        double exact = 0.0;
        for (std::size_t j = 0; j < s.k; ++j) {
          acc = std::fma(x[r * s.k + j], w[o * s.k + j], acc);
          exact += static_cast<double>(x[r * s.k + j]) * w[o * s.k + j];
        }
        naive_max = std::max(naive_max, std::fabs(acc - exact));
        y_max = std::max(y_max, std::fabs(exact));
      }
    int e = 0;
    std::frexp(y_max, &e);
    return 2.0 * naive_max + std::ldexp(1.0, e - 24);
  };
  const GemmKernel k = nudged_gemm(
      base, true, [](const GemmShape&) { return true; },
      [&](const GemmShape& s, auto x, auto w, float y0) { return moved(base.info.out, y0, kF * threshold(s, x, w)); });
  GemmCase c;
  c.shape = {4, 32, 1024};
  const CheckResults rs = check_gemm_matches_oracle(k, c, seed_for("planted_gemm_two_sided", c.id()));
  expect_just_past(result(rs, "two_sided"));
  EXPECT_TRUE(result(rs, "oracle_bound").pass) << "the plant is meant for the two-sided rule alone";
}

// Projection cache-ON vs cache-OFF: decode (M = 1) rows moved by F × (decode bound + full-prefix bound).
TEST(PlantedJustPastBound, ProjectionOnOffBound) {
  const GemmKernel& base = g1_f32();
  ProjectionCase c;
  c.prompt = 4;
  c.total = 8;
  c.n = 32;
  c.k = 1024;
  const GemmKernel k = nudged_gemm(
      base, false, [](const GemmShape& s) { return s.m == 1; },
      [&](const GemmShape& s, auto x, auto w, float y0) {
        const GemmShape off{c.total, s.n, s.k};
        return moved(base.info.out, y0, kF * (gemm_bound0(base, s, x, w) + gemm_bound0(base, off, x, w)));
      });
  expect_just_past(result(check_projection_cache_on_off(k, c, seed_for("planted_proj", c.id())), "on_off_bound"));
}

TEST(PlantedJustPastBound, ProjectionOnOffBitwise) {
  const GemmKernel& base = g1_f32();
  ASSERT_TRUE(base.info.cache_invariant);
  const GemmKernel k = nudged_gemm(
      base, true, [](const GemmShape& s) { return s.m == 1; },
      [&](const GemmShape&, auto, auto, float y0) { return next_ulp(base.info.out, y0); });
  ProjectionCase c;
  c.prompt = 4;
  c.total = 8;
  c.n = 32;
  c.k = 1024;
  expect_bitwise_caught(
      result(check_projection_cache_on_off(k, c, seed_for("planted_proj", c.id())), "on_off_bitwise"));
  EXPECT_TRUE(all_pass(check_projection_cache_on_off(base, c, seed_for("planted_proj", c.id()))));
}

// --- RMSNorm -------------------------------------------------------------------------------------
TEST(PlantedJustPastBound, NormOracleBound) {
  const NormKernel& base = *reg().find_norm("cpu.norm.r1.f32");
  NormKernel k = base;
  k.info.name += ".planted";
  k.run = [&base](const kernels::NormShape& s, const kernels::NormParams& p, std::span<const float> x,
                  std::span<const float> w, std::span<float> y) {
    base.run(s, p, x, w, y);
    // Row 0's bound (ref::rms_norm_error_terms), element 0: |y0| and Σx² in double (within 2^-40 of exact).
    double sum_sq = 0.0, max_x = 0.0;
    for (std::size_t i = 0; i < s.d; ++i) {
      sum_sq += static_cast<double>(x[i]) * x[i];
      max_x = std::max(max_x, static_cast<double>(std::fabs(x[i])));
    }
    const kernels::NormPath path = base.path(s);
    ref::RmsNormErrorInputs bi;
    bi.d = s.d;
    bi.sum_sq = sum_sq * (1.0 + 0x1p-40);
    bi.eps = static_cast<double>(p.eps);
    bi.sum_terms = ref::dot_error_terms(path.spec, path.order, s.d, max_x);
    bi.rsqrt_rel_error = path.rsqrt_rel_error;
    bi.one_plus_weight = p.one_plus_weight;
    bi.out = base.info.out;
    const double wf = p.one_plus_weight ? std::fabs(1.0 + static_cast<double>(w[0])) : std::fabs(w[0]);
    const double y_exact =
        std::fabs(static_cast<double>(x[0])) * wf / std::sqrt(sum_sq / static_cast<double>(s.d) + bi.eps);
    y[0] = moved(base.info.out, y[0], kF * ref::rms_norm_error_terms(bi).at(y_exact * (1.0 + 0x1p-40), wf));
  };
  NormCase c;
  c.shape = {2, 256};
  c.params.eps = 1e-5f;
  expect_just_past(result(check_norm_matches_oracle(k, c, seed_for("planted_norm", c.id())), "oracle_bound"));
  EXPECT_TRUE(all_pass(check_norm_matches_oracle(base, c, seed_for("planted_norm", c.id()))));
}

// The two-sided rule for RMSNorm: 2 × a naive HF fp32 pipeline's max error (sequential Σx², mean, 1/sqrt, x·r, then
// the weight, written here) + one ulp at max|y|; the plant is F times that.
TEST(PlantedJustPastBound, NormTwoSided) {
  const NormKernel& base = *reg().find_norm("cpu.norm.r1.f32");
  auto threshold = [](const kernels::NormShape& s, const kernels::NormParams& p, std::span<const float> x,
                      std::span<const float> w) {
    double naive_max = 0.0, y_max = 0.0;
    for (std::size_t r = 0; r < s.rows; ++r) {
      float ss = 0.0f;
      double exact_ss = 0.0;
      for (std::size_t i = 0; i < s.d; ++i) {
        const float v = x[r * s.d + i];
        ss += v * v;
        exact_ss += static_cast<double>(v) * v;
      }
      const float rr = 1.0f / std::sqrt(ss / static_cast<float>(s.d) + p.eps);
      const double r_exact = 1.0 / std::sqrt(exact_ss / static_cast<double>(s.d) + static_cast<double>(p.eps));
      for (std::size_t i = 0; i < s.d; ++i) {
        const float v = x[r * s.d + i];
        const float y = w[i] * (v * rr);
        const double exact = static_cast<double>(w[i]) * v * r_exact;
        naive_max = std::max(naive_max, std::fabs(y - exact));
        y_max = std::max(y_max, std::fabs(exact));
      }
    }
    int e = 0;
    std::frexp(y_max, &e);
    return 2.0 * naive_max + std::ldexp(1.0, e - 24);
  };
  NormKernel k = base;
  k.info.name += ".planted";
  k.run = [&base, threshold](const kernels::NormShape& s, const kernels::NormParams& p, std::span<const float> x,
                             std::span<const float> w, std::span<float> y) {
    base.run(s, p, x, w, y);
    y[0] = moved(base.info.out, y[0], kF * threshold(s, p, x, w));
  };
  NormCase c;
  c.shape = {2, 256};
  c.params.eps = 1e-5f;
  expect_just_past(result(check_norm_matches_oracle(k, c, seed_for("planted_norm_two_sided", c.id())), "two_sided"));
}

// --- Attention -----------------------------------------------------------------------------------
// The statistics of output element (row 0, head 0, col 0) of `call`: the oracle for that row (ref::attention); the
// element's bound under a pipeline is ref::attention_pipeline_bound of them.
ref::AttentionElementStats attention_stats0(const AttentionKernel& base, const AttentionCall& call,
                                            std::span<const float> q, std::span<const float> k,
                                            std::span<const float> v) {
  const auto& s = call.shape;
  ref::AttentionShape sh = s;
  sh.n_q = 1;
  std::vector<double> qd(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(s.n_heads * s.d));
  std::vector<double> kd(k.begin(), k.begin() + static_cast<std::ptrdiff_t>(s.n_kv * s.n_kv_heads * s.d));
  std::vector<double> vd(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(s.n_kv * s.n_kv_heads * s.d_v));
  ref::OracleOptions opt;
  opt.out = base.info.out;
  const ref::AttentionResult r = ref::attention(qd, kd, vd, sh, call.params, base.info.in, opt);
  return ref::element_stats(r, vd, sh, call.params, 0, 0, 0);
}

// base with element 0 of the calls `when` selects moved: by F × (its bound + the bound of the same row under
// partner(call)'s pipeline, the call it is compared with), or by one ulp when bitwise.
AttentionKernel nudged_attention(const AttentionKernel& base, bool bitwise,
                                 std::function<bool(const AttentionCall&)> when,
                                 std::function<AttentionCall(const AttentionCall&)> partner) {
  AttentionKernel k = base;
  k.info.name = base.info.name + ".planted";
  k.info.cache_invariant = bitwise;
  k.run = [base, bitwise, when, partner](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                                         std::span<const float> vc, std::span<float> o) {
    base.run(c, q, kc, vc, o);
    if (!when(c)) return;
    if (bitwise) {
      o[0] = next_ulp(base.info.out, o[0]);
      return;
    }
    const ref::AttentionElementStats st = attention_stats0(base, c, q, kc, vc);
    const double b = ref::attention_pipeline_bound(base.pipeline(c), c.params, st) +
                     ref::attention_pipeline_bound(base.pipeline(partner(c)), c.params, st);
    o[0] = moved(base.info.out, o[0], kF * b);
  };
  return k;
}

const AttentionKernel& a7_f32() { return *reg().find_attention("cpu.attn.a7_fixedsplit.f32"); }

AttentionCase small_case(bool causal) {
  AttentionCase c;
  c.call.shape = {8, 64, 2, 2, 64, 64};
  c.call.params.q_offset = causal ? 56 : 0;
  c.call.params.causal = causal;
  c.call.params.scale = 0.125;
  return c;
}

TEST(PlantedJustPastBound, AttentionOracleBound) {
  const AttentionKernel& base = a7_f32();
  const AttentionKernel k = nudged_attention(
      base, false, [](const AttentionCall&) { return true; }, [](const AttentionCall& c) { return c; });
  // The nudge is F × 2 × the bound here (the call is its own partner): the rule sees error/bound near 2F.
  const AttentionCase c = small_case(true);
  const CheckResults rs = check_attention_matches_oracle(k, c, seed_for("planted_attn_oracle", c.id()));
  const CheckResult& r = result(rs, "oracle_bound");
  ::testing::Test::RecordProperty("oracle_bound_error", num_measured(r.error));
  ::testing::Test::RecordProperty("oracle_bound_bound", num_measured(r.bound));
  EXPECT_FALSE(r.pass) << r.detail;
  EXPECT_LT(r.error, 2.0 * kF * 1.25 * r.bound) << r.detail;
  EXPECT_TRUE(all_pass(check_attention_matches_oracle(base, c, seed_for("planted_attn_oracle", c.id()))));
}

// The two-sided rule for attention (fp32 kernel): 2 × a naive eager fp32 pipeline's max error (sequential FMA
// scores, × scale, softmax with exp in double rounded to float, weights normalised, sequential FMA P·V: written here)
// + one ulp at max|o|; the plant is F times that.
double naive_attention_threshold(const AttentionCall& c, std::span<const float> q, std::span<const float> k,
                                 std::span<const float> v) {
  const auto& s = c.shape;
  const std::size_t G = s.n_heads / s.n_kv_heads;
  double naive_max = 0.0, o_max = 0.0;
  for (std::size_t i = 0; i < s.n_q; ++i)
    for (std::size_t h = 0; h < s.n_heads; ++h) {
      const std::int64_t pos = c.params.q_offset + static_cast<std::int64_t>(i);
      const std::size_t g = h / G, n = std::min<std::size_t>(s.n_kv, static_cast<std::size_t>(pos) + 1);
      std::vector<float> sc(n);
      std::vector<double> sd(n);
      for (std::size_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        double ex = 0.0;
        for (std::size_t t = 0; t < s.d; ++t) {
          const float a = q[(i * s.n_heads + h) * s.d + t], b = k[(j * s.n_kv_heads + g) * s.d + t];
          acc = std::fma(a, b, acc);
          ex += static_cast<double>(a) * b;
        }
        sc[j] = acc * static_cast<float>(c.params.scale);
        sd[j] = ex * c.params.scale;
      }
      const float m = *std::max_element(sc.begin(), sc.end());
      const double md = *std::max_element(sd.begin(), sd.end());
      std::vector<float> e(n);
      std::vector<double> ed(n);
      float l = 0.0f;
      double ld = 0.0;
      for (std::size_t j = 0; j < n; ++j) {
        e[j] = static_cast<float>(std::exp(static_cast<double>(sc[j] - m)));
        ed[j] = std::exp(sd[j] - md);
        l += e[j];
        ld += ed[j];
      }
      for (std::size_t col = 0; col < s.d_v; ++col) {
        float acc = 0.0f;
        double ex = 0.0;
        for (std::size_t j = 0; j < n; ++j) {
          const float vv = v[(j * s.n_kv_heads + g) * s.d_v + col];
          acc = std::fma(e[j] / l, vv, acc);
          ex += ed[j] / ld * vv;
        }
        naive_max = std::max(naive_max, std::fabs(acc - ex));
        o_max = std::max(o_max, std::fabs(ex));
      }
    }
  int ee = 0;
  std::frexp(o_max, &ee);
  return 2.0 * naive_max + std::ldexp(1.0, ee - 24);
}

TEST(PlantedJustPastBound, AttentionTwoSided) {
  const AttentionKernel& base = a7_f32();
  AttentionKernel k = base;
  k.info.name += ".planted";
  k.run = [&base](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                  std::span<const float> vc, std::span<float> o) {
    base.run(c, q, kc, vc, o);
    o[0] = moved(base.info.out, o[0], kF * naive_attention_threshold(c, q, kc, vc));
  };
  const AttentionCase c = small_case(true);
  expect_just_past(
      result(check_attention_matches_oracle(k, c, seed_for("planted_attn_two_sided", c.id())), "two_sided"));
}

TEST(PlantedJustPastBound, AttentionOnOffBound) {
  const AttentionCase c = small_case(true);
  const AttentionCall full = c.call;
  const AttentionKernel k = nudged_attention(
      a7_f32(), false, [](const AttentionCall& x) { return x.shape.n_q == 1; },
      [full](const AttentionCall&) { return full; });
  expect_just_past(result(check_attention_cache_on_off(k, c, seed_for("planted_attn_onoff", c.id())), "on_off_bound"));
}

TEST(PlantedJustPastBound, AttentionOnOffBitwise) {
  ASSERT_TRUE(a7_f32().info.cache_invariant);
  const AttentionCase c = small_case(true);
  const AttentionKernel k = nudged_attention(
      a7_f32(), true, [](const AttentionCall& x) { return x.shape.n_q == 1; },
      [](const AttentionCall& x) { return x; });
  expect_bitwise_caught(
      result(check_attention_cache_on_off(k, c, seed_for("planted_attn_onoff", c.id())), "on_off_bitwise"));
}

// Chunks are the calls with fewer query rows than the one-shot call (non-causal: every chunk sees the whole cache).
TEST(PlantedJustPastBound, AttentionChunkedBound) {
  const AttentionCase c = small_case(false);
  const AttentionCall full = c.call;
  const AttentionKernel k = nudged_attention(
      a7_f32(), false, [full](const AttentionCall& x) { return x.shape.n_q < full.shape.n_q; },
      [full](const AttentionCall&) { return full; });
  const std::vector<std::size_t> chunks = {1, 4};
  const CheckResults rs = check_attention_chunked(k, c, chunks, seed_for("planted_attn_chunked", c.id()));
  ASSERT_EQ(rs.size(), chunks.size());
  for (const auto& r : rs) expect_just_past(r);
}

TEST(PlantedJustPastBound, AttentionChunkedBitwise) {
  const AttentionCase c = small_case(false);
  const std::size_t n_q = c.call.shape.n_q;
  const AttentionKernel k = nudged_attention(
      a7_f32(), true, [n_q](const AttentionCall& x) { return x.shape.n_q < n_q; },
      [](const AttentionCall& x) { return x; });
  const std::vector<std::size_t> chunks = {1, 4};
  for (const auto& r : check_attention_chunked(k, c, chunks, seed_for("planted_attn_chunked", c.id())))
    expect_bitwise_caught(r);
}

// Calls at a capacity above n_kv moved; compared with the same call at capacity n_kv.
TEST(PlantedJustPastBound, AttentionCapacityBound) {
  const AttentionCase c = small_case(true);
  const AttentionKernel k = nudged_attention(
      a7_f32(), false, [](const AttentionCall& x) { return x.cap() > x.shape.n_kv; },
      [](const AttentionCall& x) {
        AttentionCall p = x;
        p.capacity = x.shape.n_kv;
        return p;
      });
  expect_just_past(result(check_attention_capacity(k, c, seed_for("planted_attn_capacity", c.id())), "capacity_bound"));
}

TEST(PlantedJustPastBound, AttentionCapacityBitwise) {
  const AttentionCase c = small_case(true);
  const AttentionKernel k = nudged_attention(
      a7_f32(), true, [](const AttentionCall& x) { return x.cap() > x.shape.n_kv; },
      [](const AttentionCall& x) { return x; });
  expect_bitwise_caught(
      result(check_attention_capacity(k, c, seed_for("planted_attn_capacity", c.id())), "capacity_bitwise"));
}

// --- Model rules (FlipsAreNearTies) ---------------------------------------------------------------------------
struct ModelPlant {
  engine::Model m16, m32;
  engine::ProfileKernels k16, k32;
  std::vector<int> prompt;
  std::vector<std::vector<float>> z_off;  // greedy cache-OFF logits per step (= cache-ON's: invariant profile)
  std::vector<double> S;                  // S_t = max over s <= t of ||z_off,s − z_ref,s||∞
};

ModelPlant model_plant(engine::Arch a, std::uint64_t prompt_seed, std::size_t steps) {
  ModelPlant p;
  const engine::ModelConfig c = engine::testing::small_config(a);
  p.m16 = engine::testing::random_model(c, Format::fp16, 41);
  p.m32 = engine::convert(p.m16, Format::fp32);
  p.k16 = engine::resolve(engine::find_profile("fp16-invariant"), reg());
  p.k32 = engine::resolve(engine::find_profile("fp32"), reg());
  p.prompt = engine::testing::random_tokens(12, c.vocab, prompt_seed);
  engine::Context off(p.m16, p.k16), ref(p.m32, p.k32);
  std::vector<int> seq = p.prompt;
  double S = 0.0;
  for (std::size_t s = 0; s < steps; ++s) {
    std::vector<float> z = off.recompute(seq);
    const std::vector<float> zr = ref.recompute(seq);
    for (std::size_t i = 0; i < z.size(); ++i) S = std::max(S, std::fabs(static_cast<double>(z[i]) - zr[i]));
    p.S.push_back(S);
    seq.push_back(engine::sample(engine::Sampler{}, z, 0.0));  // greedy, as run_free picks
    p.z_off.push_back(std::move(z));
  }
  return p;
}

// perturbation_rounding_sized: every decode call's lowest logit lowered by F·2S (never a flip under greedy).
TEST(PlantedJustPastBound, ModelPerturbationRoundingSized) {
  constexpr std::size_t kSteps = 10;
  const ModelPlant p = model_plant(engine::Arch::llama, 7, kSteps);
  const double delta = kF * 2.0 * p.S.back();
  engine::ContextOptions o;
  o.decode_logits_plant = [delta](std::vector<float>& z) {
    auto lo = std::min_element(z.begin(), z.end());
    *lo = static_cast<float>(static_cast<double>(*lo) - delta);
  };
  engine::Context ctx(p.m16, p.k16, o), ref(p.m32, p.k32);
  analysis::PairOptions po;
  po.steps = kSteps;
  const CheckResults rs = check_flips_are_near_ties(ctx, ref, p.prompt, po, 1);
  expect_just_past(result(rs, "perturbation_rounding_sized"));
  engine::Context clean(p.m16, p.k16);
  EXPECT_TRUE(result(check_flips_are_near_ties(clean, ref, p.prompt, po, 1), "perturbation_rounding_sized").pass);
}

// flip_near_tie: at the first step t >= 1 whose top-2 margin is below F·4S_t, the runner-up raised by F·4S_t (a flip
// with |Δa| + |Δb| = F·4S_t). Prompts are tried in a fixed order until one has such a step.
TEST(PlantedJustPastBound, ModelFlipNearTie) {
  constexpr std::size_t kSteps = 24;
  for (std::uint64_t prompt_seed = 1; prompt_seed <= 12; ++prompt_seed) {
    const ModelPlant p = model_plant(engine::Arch::mistral, prompt_seed, kSteps);
    for (std::size_t t = 1; t < kSteps; ++t) {
      std::vector<float> z = p.z_off[t];
      const auto top1 = static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin());
      const float best = z[top1];
      z[top1] = -1e30f;
      const auto top2 = static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin());
      const double margin = static_cast<double>(best) - z[top2], delta = kF * 4.0 * p.S[t];
      if (!(margin < delta) || margin == 0.0) continue;
      engine::ContextOptions o;
      std::size_t call = 0;
      o.decode_logits_plant = [&call, t, top2, delta](std::vector<float>& zz) {
        if (++call == t) zz[top2] = static_cast<float>(static_cast<double>(zz[top2]) + delta);
      };
      engine::Context ctx(p.m16, p.k16, o), ref(p.m32, p.k32);
      analysis::PairOptions po;
      po.steps = kSteps;
      const CheckResults rs = check_flips_are_near_ties(ctx, ref, p.prompt, po, 1);
      std::printf("planted flip at step %zu (prompt seed %llu): margin %.6g, S_t %.6g, nudge %.6g\n", t,
                  static_cast<unsigned long long>(prompt_seed), margin, p.S[t], delta);
      expect_just_past(result(rs, "flip_near_tie"));
      EXPECT_TRUE(result(rs, "flip_consistency").pass) << describe(rs);
      return;
    }
  }
  FAIL() << "no step with a top-2 margin below 6·S in 12 prompts × 24 steps: the plant cannot be placed";
}

}  // namespace
}  // namespace kvconf::conformance
