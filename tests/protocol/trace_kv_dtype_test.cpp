// kvconf check on kv_dtype pairs (protocol::check_trace_pair; docs/SCENARIOS.md): side A's K/V rows, kept in the
// trace's scenario.kv_format, are judged within the format's step of side B's in layer 0 over the prompt's rows
// (cached_kv); the logits' effect is only reported (no near-tie rule, no bitwise rule), and a cache rounded toward
// zero, or kept in q4_0 while the trace says q8_0, fails cached_kv.
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "kvconf/engine/kv_format.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "kvconf/protocol/trace_check.hpp"

namespace kvconf::protocol {
namespace {

using engine::CallRecord;

constexpr std::size_t kPrompt = 6, kSteps = 4, kLayers = 2, kKvDim = 64;

// A kv_dtype side: the plain cache-ON calls; side A's logits differ (a narrower cache moves them) and its token at
// step 2 flips, which the near-tie rules would judge.
Trace side(bool side_a, const std::vector<float>& k, const std::vector<float>& v, const std::string& format) {
  Trace t;
  t.file = side_a ? "kv_dtype.scenario" : "kv_dtype.reference";
  t.engine = "an-engine";
  t.engine_version = "1";
  t.attention = "any";
  t.model_name = "m";
  t.vocab = 4;
  t.dtype = "float16";
  t.logits_dtype = "F16";
  t.cache_on = true;
  t.side_a = side_a;
  t.prompt_id = "p0";
  for (std::size_t i = 0; i < kPrompt; ++i) t.prompt_ids.push_back(static_cast<int>(i % 4));
  for (std::size_t s = 0; s < kSteps; ++s) {
    const bool flip = side_a && s >= 2;
    t.generated_ids.push_back(flip ? 2 : 1);
    t.logits.push_back(flip ? std::vector<float>{0.0f, 1.0f, 3.0f, -1.0f}
                            : std::vector<float>{0.0f, 2.0f, 0.5f, -1.0f});
  }
  t.scenario = engine::Scenario::kv_dtype;
  t.kv_format = format;
  t.calls.push_back({kPrompt, 0});
  for (std::size_t s = 1; s < kSteps; ++s) t.calls.push_back({1, kPrompt + s - 1});
  for (std::size_t s = 0; s < kSteps; ++s) t.call_of_step.push_back(s);
  for (const CallRecord& c : t.calls) t.cache_after.push_back(c.cached + c.fed);
  t.calls_reported_by = "this test";
  t.n_layers = kLayers;
  t.kv_rows = kPrompt + kSteps - 1;
  t.kv_dim = kKvDim;
  t.k_rows = k;
  t.v_rows = v;
  return t;
}

std::vector<float> fp16_rows(unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> n(0.0, 2.0);
  std::vector<float> x(kLayers * (kPrompt + kSteps - 1) * kKvDim);
  for (float& e : x) e = static_cast<float>(round_to(Format::fp16, n(g)));
  return x;
}

// Every layer's rows through format f (truncate: rounding toward zero, a planted fault).
std::vector<float> stored(std::vector<float> x, engine::KvFormat f, bool truncate) {
  engine::QuantCheck unused;
  const std::size_t rows = kPrompt + kSteps - 1;
  for (std::size_t l = 0; l < kLayers; ++l)
    engine::quantize_rows(f, std::span<float>(x).subspan(l * rows * kKvDim, rows * kKvDim), kKvDim, 0, rows,
                          Format::fp16, truncate, unused);
  return x;
}

const results::CheckResult* rule(const results::RunPairRecord& r, const std::string& name) {
  for (const results::CheckResult& x : r.rules)
    if (x.rule == name) return &x;
  return nullptr;
}

results::RunPairRecord check(engine::KvFormat stored_as, const std::string& claimed, bool truncate) {
  const std::vector<float> k = fp16_rows(1), v = fp16_rows(2);
  TracePair p{side(true, stored(k, stored_as, truncate), stored(v, stored_as, truncate), claimed),
              side(false, k, v, claimed)};
  return check_trace_pair(p, nullptr);
}

TEST(TraceCheckKvDtype, TheCacheIsJudgedTheLogitsReported) {
  for (const char* f : {"fp8_e4m3", "fp8_e5m2", "int8_token", "int4_token", "q8_0", "q4_0"}) {
    const results::RunPairRecord r = check(*engine::parse_kv_format(f), f, false);
    const results::CheckResult* kv = rule(r, "cached_kv");
    ASSERT_NE(kv, nullptr) << f;
    EXPECT_TRUE(kv->pass) << f << ": " << kv->detail;
    EXPECT_NE(kv->detail.find("the 6 rows both sides computed by the same call"), std::string::npos) << kv->detail;
    const results::CheckResult* path = rule(r, "scenario_path");
    ASSERT_NE(path, nullptr) << f;
    EXPECT_TRUE(path->pass) << path->detail;
    // The flip at step 2 is reported in the record, not judged.
    for (const char* judged : {"flip_near_tie", "perturbation_rounding_sized", "no_flip", "scenario_bitwise"})
      EXPECT_EQ(rule(r, judged), nullptr) << f << ": " << judged;
    ASSERT_TRUE(r.free.flip.has_value()) << f;
    EXPECT_EQ(*r.free.flip, 2u) << f;
    EXPECT_GT(r.free.max_abs_logit_diff.at(2), 0.0) << f;
  }
}

TEST(TraceCheckKvDtype, ATruncatingOrWrongFormatCacheFailsCachedKv) {
  for (const char* f : {"fp8_e4m3", "fp8_e5m2", "int8_token", "int4_token", "q8_0", "q4_0"}) {
    const results::RunPairRecord r = check(*engine::parse_kv_format(f), f, true);
    const results::CheckResult* kv = rule(r, "cached_kv");
    ASSERT_NE(kv, nullptr);
    EXPECT_FALSE(kv->pass) << f << " truncated passed: " << kv->detail;
  }
  const results::RunPairRecord r = check(engine::KvFormat::q4_0, "q8_0", false);
  ASSERT_NE(rule(r, "cached_kv"), nullptr);
  EXPECT_FALSE(rule(r, "cached_kv")->pass) << "a q4_0 cache passed as q8_0: " << rule(r, "cached_kv")->detail;
}

}  // namespace
}  // namespace kvconf::protocol
