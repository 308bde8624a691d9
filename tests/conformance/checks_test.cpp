// Unit tests of the conformance checks ("test the tester"): correct tiny kernels pass every rule, planted bugs
// fail the rule meant to catch them, headroom and bitwise semantics, measurement helpers, case tables and seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>

#include "checks_common.hpp"
#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/checks.hpp"
#include "test_support.hpp"
#include "tiny_kernels.hpp"

namespace kvconf::conformance {
namespace {

using test::AttnBug;
using test::GemmBug;

// The result with this rule, or fail.
const CheckResult& rule(const CheckResults& r, const std::string& name) {
  for (const auto& x : r)
    if (x.rule == name) return x;
  ADD_FAILURE() << "no result for rule " << name << " in:\n" << describe(r);
  static const CheckResult none;
  return none;
}

ProjectionCase proj_case() {
  ProjectionCase c;
  c.prompt = 5;
  c.total = 9;
  c.n = 24;
  c.k = 256;
  return c;
}

// A small causal GQA case with prior context (q_offset > 0) and spare capacity.
AttentionCase attn_case(std::size_t n_q = 6, std::size_t n_kv = 40, std::size_t cap = 0, double softcap = 0.0,
                        std::int64_t window = 0, bool causal = true) {
  AttentionCase c;
  c.call.shape = {n_q, n_kv, 4, 2, 16, 16};
  c.call.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  c.call.params.causal = causal;
  c.call.params.window = window;
  c.call.params.scale = 0.25;
  c.call.params.softcap = softcap;
  c.call.capacity = cap;
  return c;
}

constexpr std::uint64_t kSeed = 12345;

// --- GEMM ------------------------------------------------------------------------------------------

TEST(ConformanceChecks, CorrectGemmPassesOracleAndTwoSided) {
  const auto k = test::tiny_gemm(GemmBug::none);
  for (Data d : {Data::normal, Data::same_sign, Data::wide_range}) {
    const auto r = check_gemm_matches_oracle(k, gemm_case(3, 16, 512, d), kSeed);
    EXPECT_TRUE(all_pass(r)) << describe(r);
    const auto& ob = rule(r, "oracle_bound");
    EXPECT_GT(ob.bound, 0.0);
    EXPECT_LE(ob.error, ob.bound);
    EXPECT_GE(ob.headroom, 0.0);
    EXPECT_LE(ob.headroom, 1.0);
    EXPECT_EQ(ob.seed, kSeed);
    EXPECT_NE(ob.detail.find("seed=12345"), std::string::npos) << ob.detail;
    rule(r, "two_sided");
  }
}

TEST(ConformanceChecks, DroppedTermFailsOracleBound) {
  const auto r = check_gemm_matches_oracle(test::tiny_gemm(GemmBug::drop_last_term), gemm_case(2, 16, 1024), kSeed);
  const auto& ob = rule(r, "oracle_bound");
  EXPECT_FALSE(ob.pass) << describe(r);
  EXPECT_LT(ob.headroom, 0.0);
  EXPECT_GT(ob.error, ob.bound);
  EXPECT_FALSE(all_pass(r));
}

TEST(ConformanceChecks, HiddenFp16AccumulationFailsTwoSidedAndOracle) {
  // On N(0,1) data the a-priori fp32 bound (a worst case) can still cover fp16 accumulation; the two-sided rule
  // (no worse than a naive fp32 loop) is what catches it ...
  auto r = check_gemm_matches_oracle(test::tiny_gemm(GemmBug::fp16_accumulate), gemm_case(2, 32, 4096), kSeed);
  EXPECT_FALSE(rule(r, "two_sided").pass) << describe(r);
  // ... and on same-sign data (fp16 stagnation) the oracle bound fails too.
  r = check_gemm_matches_oracle(test::tiny_gemm(GemmBug::fp16_accumulate), gemm_case(2, 32, 4096, Data::same_sign),
                                kSeed);
  EXPECT_FALSE(rule(r, "oracle_bound").pass) << describe(r);
  EXPECT_FALSE(rule(r, "two_sided").pass) << describe(r);
}

TEST(ConformanceChecks, ProjectionCacheOnOff) {
  // Correct and cache-invariant: bitwise.
  auto r = check_projection_cache_on_off(test::tiny_gemm(GemmBug::none), proj_case(), kSeed);
  EXPECT_TRUE(all_pass(r)) << describe(r);
  EXPECT_EQ(rule(r, "on_off_bitwise").headroom, 1.0);
  EXPECT_EQ(rule(r, "on_off_bitwise").bound, 0.0);
  // A different decode precision while claiming invariance: bitwise fails ...
  r = check_projection_cache_on_off(test::tiny_gemm(GemmBug::decode_fp16_acc), proj_case(), kSeed);
  EXPECT_FALSE(rule(r, "on_off_bitwise").pass) << describe(r);
  EXPECT_EQ(rule(r, "on_off_bitwise").headroom, -std::numeric_limits<double>::infinity());
  EXPECT_GT(rule(r, "on_off_bitwise").error, 0.0);
  // ... while without the claim the difference is an honest rounding one, within the sum of the bounds.
  r = check_projection_cache_on_off(test::tiny_gemm(GemmBug::decode_fp16_acc, false), proj_case(), kSeed);
  EXPECT_TRUE(rule(r, "on_off_bound").pass) << describe(r);
  EXPECT_GT(rule(r, "on_off_bound").bound, 0.0);
  // A bug shared by both paths is invisible to rule 2 (rule 1 catches it: DroppedTermFailsOracleBound).
  r = check_projection_cache_on_off(test::tiny_gemm(GemmBug::drop_last_term, false), proj_case(), kSeed);
  EXPECT_TRUE(rule(r, "on_off_bound").pass) << describe(r);
}

TEST(ConformanceChecks, ProjectionMeasureCountsDifferences) {
  const auto same = measure_projection_on_off(test::tiny_gemm(GemmBug::none), proj_case(), kSeed);
  EXPECT_EQ(same.differing, 0u);
  EXPECT_EQ(same.max_ulp, 0.0);
  EXPECT_EQ(same.elements, 9u * 24u);
  const auto diff = measure_projection_on_off(test::tiny_gemm(GemmBug::decode_fp16_acc), proj_case(), kSeed);
  EXPECT_GT(diff.differing, 0u);
  EXPECT_GE(diff.max_ulp, 0.5);
  EXPECT_GT(diff.max_rel, 0.0);
}

// --- RMSNorm ----------------------------------------------------------------------------------------

NormCase norm_case(std::size_t rows, std::size_t d, bool gemma, Data data = Data::normal) {
  NormCase c;
  c.shape = {rows, d};
  c.params.eps = 1e-6f;
  c.params.one_plus_weight = gemma;
  c.data = data;
  return c;
}

TEST(ConformanceChecks, CorrectNormPassesAndWrongMeanFails) {
  for (bool gemma : {false, true})
    for (Data d : {Data::normal, Data::wide_range, Data::same_sign}) {
      const auto c = norm_case(3, 256, gemma, d);
      auto r = check_norm_matches_oracle(test::tiny_norm(test::NormBug::none), c, kSeed);
      EXPECT_TRUE(all_pass(r)) << describe(r);
      EXPECT_GT(rule(r, "oracle_bound").bound, 0.0);
      r = check_norm_matches_oracle(test::tiny_norm(test::NormBug::mean_over_d_minus_1), c, kSeed);
      EXPECT_FALSE(rule(r, "oracle_bound").pass) << describe(r);
      EXPECT_FALSE(rule(r, "two_sided").pass) << describe(r);
    }
}

// --- Attention --------------------------------------------------------------------------------------

TEST(ConformanceChecks, CorrectAttentionPassesEveryRule) {
  const auto k = test::tiny_attention(AttnBug::none);
  for (const auto& c :
       {attn_case(), attn_case(6, 40, 70, 50.0, 8), attn_case(1, 33), attn_case(5, 20, 0, 0.0, 6, false)}) {
    SCOPED_TRACE(c.id());
    auto r = check_attention_matches_oracle(k, c, kSeed);
    EXPECT_TRUE(all_pass(r)) << describe(r);
    EXPECT_LE(rule(r, "oracle_bound").headroom, 1.0);
    EXPECT_TRUE(std::isfinite(rule(r, "oracle_bound").bound)) << describe(r);
    r = check_attention_cache_on_off(k, c, kSeed);
    EXPECT_TRUE(all_pass(r)) << describe(r);
    rule(r, "on_off_bitwise");
    const std::size_t chunks[] = {1, 4, 16};
    r = check_attention_chunked(k, c, chunks, kSeed);
    EXPECT_EQ(r.size(), 3u);
    EXPECT_TRUE(all_pass(r)) << describe(r);
    r = check_attention_unused_slots(k, c, kSeed);
    EXPECT_TRUE(all_pass(r)) << describe(r);
    r = check_attention_capacity(k, c, kSeed);
    EXPECT_TRUE(all_pass(r)) << describe(r);
    rule(r, "capacity_bitwise");
  }
}

TEST(ConformanceChecks, NonInvariantAttentionUsesBoundRules) {
  const auto k = test::tiny_attention(AttnBug::decode_fp16_pv, false);
  const auto c = attn_case();
  auto r = check_attention_cache_on_off(k, c, kSeed);
  EXPECT_TRUE(rule(r, "on_off_bound").pass) << describe(r);
  EXPECT_GT(rule(r, "on_off_bound").bound, 0.0);
  r = check_attention_chunked(k, c, 1, kSeed);  // chunks of one row are decodes: fp16 PV, within bounds
  EXPECT_TRUE(rule(r, "chunked_bound").pass) << describe(r);
  r = check_attention_capacity(k, c, kSeed);
  EXPECT_TRUE(rule(r, "capacity_bound").pass) << describe(r);
}

TEST(ConformanceChecks, ReadingUnusedSlotsFails) {
  const auto k = test::tiny_attention(AttnBug::reads_unused_slots);
  const auto r = check_attention_unused_slots(k, attn_case(), kSeed);
  EXPECT_FALSE(rule(r, "unused_slots").pass) << describe(r);
  EXPECT_GT(rule(r, "unused_slots").error, 0.0);
  // With finite garbage in the spare rows and 0 weights it computes the right thing: only the NaN poison shows it.
  EXPECT_TRUE(all_pass(check_attention_matches_oracle(k, attn_case(6, 40, 64), kSeed)));
}

TEST(ConformanceChecks, DecodeMaskOffByOneFailsOnOffAndOracle) {
  const auto k = test::tiny_attention(AttnBug::decode_mask_short, false);
  auto r = check_attention_cache_on_off(k, attn_case(), kSeed);
  EXPECT_FALSE(rule(r, "on_off_bound").pass) << describe(r);
  r = check_attention_matches_oracle(k, attn_case(1, 33), kSeed);
  EXPECT_FALSE(rule(r, "oracle_bound").pass) << describe(r);
  r = check_attention_chunked(k, attn_case(), 1, kSeed);
  EXPECT_FALSE(rule(r, "chunked_bound").pass) << describe(r);
}

TEST(ConformanceChecks, MaskIgnoringOffsetFailsOracleAndChunked) {
  const auto k = test::tiny_attention(AttnBug::mask_ignores_offset, false);
  auto r = check_attention_matches_oracle(k, attn_case(), kSeed);
  EXPECT_FALSE(rule(r, "oracle_bound").pass) << describe(r);
  r = check_attention_chunked(k, attn_case(), 4, kSeed);
  EXPECT_FALSE(rule(r, "chunked_bound").pass) << describe(r);
}

TEST(ConformanceChecks, BrokenInvarianceClaimsFailBitwiseRules) {
  auto r = check_attention_cache_on_off(test::tiny_attention(AttnBug::decode_fp16_pv), attn_case(6, 300), kSeed);
  EXPECT_FALSE(rule(r, "on_off_bitwise").pass) << describe(r);
  // Its decode path is honest about fp16 PV: within its a-priori bound (the two-sided rule flags the precision loss
  // against a naive fp32 loop).
  const auto o =
      check_attention_matches_oracle(test::tiny_attention(AttnBug::decode_fp16_pv), attn_case(1, 300), kSeed);
  EXPECT_TRUE(rule(o, "oracle_bound").pass) << describe(o);
  EXPECT_FALSE(rule(o, "two_sided").pass) << describe(o);
  r = check_attention_capacity(test::tiny_attention(AttnBug::capacity_fp16_pv), attn_case(6, 300), kSeed);
  EXPECT_FALSE(rule(r, "capacity_bitwise").pass) << describe(r);
  EXPECT_NE(r[0].detail.find("capacity="), std::string::npos) << r[0].detail;
}

// A kernel that takes no masked prefill shorter than its keys (SDPA's CUDA flash backend, seen on the first H100 run)
// has its decode compared with the full recompute instead of failing as unsupported; one that takes neither fails.
TEST(ConformanceChecks, DecodeOnOffFallsBackToTheFullRecompute) {
  auto k = test::tiny_attention(AttnBug::none);
  k.supports = [](const kernels::AttentionCall& c) -> kernels::Reason {
    if (c.shape.n_q > 1 && c.shape.n_q < c.shape.n_kv) return "no mask";
    return std::nullopt;
  };
  auto r = check_attention_cache_on_off(k, attn_case(1, 33), kSeed);
  EXPECT_TRUE(rule(r, "on_off_bitwise").pass) << describe(r);
  k.supports = [](const kernels::AttentionCall& c) -> kernels::Reason {
    if (c.shape.n_q > 1) return "decode only";
    return std::nullopt;
  };
  r = check_attention_cache_on_off(k, attn_case(1, 33), kSeed);
  EXPECT_FALSE(rule(r, "on_off_bitwise").pass) << describe(r);
  EXPECT_NE(r[0].detail.find("decode only"), std::string::npos) << r[0].detail;
}

TEST(ConformanceChecks, AttentionMeasure) {
  const auto m = measure_attention_on_off(test::tiny_attention(AttnBug::decode_fp16_pv), attn_case(6, 300), kSeed);
  EXPECT_EQ(m.elements, 4u * 16u);
  EXPECT_GT(m.differing, 0u);
  EXPECT_GE(m.max_ulp, 0.5);
}

// --- Semantics of results and measurements -----------------------------------------------------------

TEST(ConformanceChecks, HeadroomAndBitwiseSemantics) {
  using detail::bitwise_result;
  using detail::bound_result;
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_DOUBLE_EQ(bound_result("r", 1.0, 4.0, 7, "").headroom, 0.75);
  EXPECT_TRUE(bound_result("r", 4.0, 4.0, 7, "").pass);
  EXPECT_EQ(bound_result("r", 4.0, 4.0, 7, "").headroom, 0.0);
  const auto over = bound_result("r", 6.0, 4.0, 7, "");
  EXPECT_FALSE(over.pass);
  EXPECT_DOUBLE_EQ(over.headroom, -0.5);
  EXPECT_FALSE(bound_result("r", std::nan(""), 4.0, 7, "").pass);
  EXPECT_EQ(bound_result("r", std::nan(""), 4.0, 7, "").headroom, -inf);
  // A vacuous bound checks nothing: the result fails and says so.
  EXPECT_FALSE(bound_result("r", 1.0, inf, 7, "").pass);
  EXPECT_EQ(bound_result("r", 1.0, inf, 7, "").headroom, -inf);
  EXPECT_NE(bound_result("r", 1.0, inf, 7, "").detail.find("vacuous"), std::string::npos);
  EXPECT_EQ(bound_result("r", 0.0, 0.0, 7, "").headroom, 1.0);
  const auto eq = bitwise_result("b", 0.0, 7, "");
  EXPECT_TRUE(eq.pass);
  EXPECT_EQ(eq.headroom, 1.0);
  EXPECT_EQ(eq.bound, 0.0);
  const auto ne = bitwise_result("b", 1e-30, 7, "");
  EXPECT_FALSE(ne.pass);
  EXPECT_EQ(ne.headroom, -inf);
  const std::string d = describe({eq, ne});
  EXPECT_NE(d.find("b pass error=0 bound=0 headroom=1 seed=7"), std::string::npos) << d;
  EXPECT_NE(d.find("b FAIL"), std::string::npos) << d;
  EXPECT_TRUE(all_pass({eq}));
  EXPECT_FALSE(all_pass({eq, ne}));
}

TEST(ConformanceChecks, ComparisonSeesSignedZerosAndNaN) {
  detail::Comparison c;
  c.bitwise = true;
  c.add(0.0, -0.0, 0, 0);
  EXPECT_EQ(c.differ, 1u);
  EXPECT_GT(c.bitwise_error(), 0.0);  // bitwise rules see the sign of zero
  detail::Comparison n;
  n.bitwise = true;
  n.add(1.0, 1.0, 0, 0);
  EXPECT_EQ(n.bitwise_error(), 0.0);
  n.add(std::nan(""), 1.0, 0, 1);
  EXPECT_TRUE(std::isnan(n.bitwise_error()));
  EXPECT_EQ(n.diff_index, 1u);
}

TEST(ConformanceChecks, UlpsAndErrors) {
  EXPECT_EQ(detail::ulp(Format::fp16, 1.0), 0x1p-10);
  EXPECT_EQ(detail::ulp(Format::fp16, 1.999), 0x1p-10);
  EXPECT_EQ(detail::ulp(Format::fp16, 2.0), 0x1p-9);
  EXPECT_EQ(detail::ulp(Format::fp16, 0.0), 0x1p-24);
  EXPECT_EQ(detail::ulp(Format::bf16, 1.0), 0x1p-7);
  EXPECT_EQ(detail::ulp(Format::fp32, 1.0), 0x1p-23);
  EXPECT_EQ(detail::ulp(Format::fp16, 1e9), 32.0);  // above the range: the top binade's spacing
  EXPECT_EQ(detail::ulp_distance(Format::fp16, 1.0, 1.0 + 0x1p-10), 1u);
  EXPECT_EQ(detail::ulp_distance(Format::fp16, 0x1p-24, -0x1p-24), 2u);
  EXPECT_EQ(detail::ulp_distance(Format::fp16, 0.0, -0.0), 0u);
  EXPECT_EQ(detail::ulp_distance(Format::bf16, 1.0, 2.0), 128u);
  EXPECT_EQ(detail::ulp_error(Format::fp16, 1.0, 1.0 + 0x1p-10), 1.0);
  EXPECT_EQ(detail::ulp_error(Format::fp16, 0x1p-20, -0x1p-20),
            32.0);  // across zero: |a − b| / ulp(2^-20) = 2^-19/2^-24
  EXPECT_EQ(detail::ulp_error(Format::fp32, 2.0, 2.0), 0.0);
  EXPECT_EQ(detail::diff_up(1.0, 1.0), 0.0);
  EXPECT_EQ(detail::diff_up(3.0, 1.0), 2.0);
  EXPECT_GE(detail::diff_up(1.0, 0x1p-60), 1.0);  // inexact: rounded up
  EXPECT_GT(detail::diff_up(1.0, 0x1p-60), 1.0 - 0x1p-60);
  EXPECT_GT(detail::error_up(1.0, 1.0), 0.0);  // the oracle's double approximation is itself off by <= 1/2 ulp
  EXPECT_LE(detail::error_up(1.0, 1.0), 0x1p-51);
}

TEST(ConformanceChecks, UnsupportedShapesFailWhenChecked) {
  auto k = test::tiny_gemm(GemmBug::none);
  k.supports = [](const kernels::GemmShape& s) -> kernels::Reason {
    if (s.m == 1) return "no decode path";
    return std::nullopt;
  };
  const auto r = check_projection_cache_on_off(k, proj_case(), kSeed);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].pass);
  EXPECT_NE(r[0].detail.find("no decode path"), std::string::npos);
}

// --- Case tables, ids and seeds ----------------------------------------------------------------------

template <class C>
void expect_unique_ids(const std::vector<C>& cases, const char* what) {
  std::set<std::string> ids;
  for (const auto& c : cases) EXPECT_TRUE(ids.insert(c.id()).second) << what << ": duplicate id " << c.id();
  EXPECT_FALSE(cases.empty()) << what;
}

TEST(ConformanceCases, IdsAreUniquePerTable) {
  expect_unique_ids(gemm_cases(), "gemm");
  expect_unique_ids(projection_cases(), "projection");
  expect_unique_ids(norm_cases(), "norm");
  expect_unique_ids(attention_cases(), "attention");
}

TEST(ConformanceCases, IdFormat) {
  EXPECT_EQ(gemm_case(1, 256, 4096).id(), "m1_n256_k4096_normal");
  EXPECT_EQ(proj_case().id(), "p5_t9_n24_k256_normal");
  NormCase n;
  n.shape = {1, 4096};
  n.params.eps = 1e-6f;
  EXPECT_EQ(n.id(), "r1_d4096_eps1e-06_llama_normal");
  auto a = attn_case(16, 128, 0, 50.0, 0);
  a.call.shape = {16, 128, 8, 4, 128, 128};
  a.data = Data::p_flush;
  EXPECT_EQ(a.id(), "q16_kv128_d128_h8_gqa2_causal_win0_cap0_sc50_p_flush");
}

TEST(ConformanceCases, TablesCoverTheDesignedRange) {
  std::set<std::size_t> dims, ratios;
  std::size_t min_kv = SIZE_MAX, max_kv = 0;
  bool causal = false, noncausal = false, window = false, softcap = false, slow = false, fast = false;
  std::set<Data> kinds;
  for (const auto& c : attention_cases()) {
    const auto& s = c.call.shape;
    dims.insert(s.d);
    ratios.insert(s.n_heads / s.n_kv_heads);
    min_kv = std::min(min_kv, s.n_kv);
    max_kv = std::max(max_kv, s.n_kv);
    (c.call.params.causal ? causal : noncausal) = true;
    window |= c.call.params.window > 0;
    softcap |= c.call.params.softcap == 50.0;
    kinds.insert(c.data);
    (c.slow ? slow : fast) = true;
    if (s.n_kv >= 1024) {
      EXPECT_TRUE(c.slow) << c.id() << ": n_kv >= 1024 must be slow";
    }
    EXPECT_LE(s.n_q, s.n_kv) << c.id();
    EXPECT_GE(c.call.cap(), s.n_kv) << c.id();
  }
  EXPECT_EQ(dims, (std::set<std::size_t>{64, 128, 256}));
  EXPECT_EQ(ratios, (std::set<std::size_t>{1, 2, 4, 8}));
  EXPECT_EQ(min_kv, 1u);
  EXPECT_EQ(max_kv, 4096u);
  EXPECT_TRUE(causal && noncausal && window && softcap && slow && fast);
  EXPECT_EQ(kinds.size(), 5u);
}

TEST(ConformanceCases, SeedsDifferByCaseAndRuleAndRespectKvconfSeed) {
  const char* saved = std::getenv("KVCONF_SEED");
  const std::string keep = saved ? saved : "";
  unsetenv("KVCONF_SEED");
  std::set<std::uint64_t> seeds;
  for (const auto& c : attention_cases()) EXPECT_TRUE(seeds.insert(seed_for("attention_oracle", c.id())).second);
  for (const auto& c : gemm_cases()) EXPECT_TRUE(seeds.insert(seed_for("gemm_oracle", c.id())).second);
  EXPECT_NE(seed_for("a", "x"), seed_for("b", "x"));
  EXPECT_EQ(seed_for("a", "x"), seed_for("a", "x"));
  setenv("KVCONF_SEED", "424242", 1);
  EXPECT_EQ(seed_for("a", "x"), 424242u);
  EXPECT_EQ(seed_for("b", "y"), 424242u);
  setenv("KVCONF_SEED", "0x10", 1);
  EXPECT_EQ(seed_for("a", "x"), 16u);
  if (saved)
    setenv("KVCONF_SEED", keep.c_str(), 1);
  else
    unsetenv("KVCONF_SEED");
}

TEST(ConformanceCases, MakeValuesIsSeededAndInFormat) {
  for (Data d : {Data::normal, Data::same_sign, Data::wide_range, Data::near_exp_overflow, Data::p_flush})
    for (Format f : {Format::fp16, Format::bf16, Format::fp32}) {
      const auto a = make_values(257, f, d, 99);
      EXPECT_EQ(a, make_values(257, f, d, 99));
      EXPECT_NE(a, make_values(257, f, d, 100));
      for (float x : a) EXPECT_TRUE(representable(f, x)) << data_name(d) << " " << x;
      if (d == Data::same_sign) {
        for (float x : a) EXPECT_TRUE(x >= 0.5f && x <= 1.5f) << x;
      }
    }
  EXPECT_THROW(make_values(4, Format::fp64, Data::normal, 1), std::invalid_argument);
}

}  // namespace
}  // namespace kvconf::conformance
