// Rule 2 for attention, every kernel of the registry on every attention case, each test one rule of
// kernel_rules.hpp's attention table (the list the sweep and Python run too):
//   Cpu/AttentionConformance.CacheOnMatchesCacheOff  decode row vs the last prefill row
//   Cpu/AttentionConformance.ChunkedMatchesOneShot   chunked prefill (chunks of 1, 4, 16 rows) vs one shot
//   Cpu/AttentionConformance.UnusedSlotsNeverRead    NaN in cache rows [n_kv, capacity) never reaches the output
//   Cpu/AttentionConformance.CapacityInvariant       cache-invariant kernels: output independent of capacity
// each within the sum of the paths' bounds, or bitwise for cache-invariant kernels; and
// Cpu/AttentionConformanceSeeds.SlowManySeeds: every attention rule (oracle included) over 20 seeds per case.
// Built with KVCONF_SUITE_GPU: the same over the GPU registry, prefix Cuda/ (conformance_gpu_*, label gpu).
#include "kvconf/conformance/kernel_rules.hpp"
#include "suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

using AttnParam = Param<kernels::AttentionKernel, AttentionCase>;

// One rule of kernel_rules.hpp's attention table on the test's kernel and case, recorded and expected to pass.
void check(const char* rule, const AttnParam& p) {
  const auto& [k, c] = p;
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  const RuleRun r = run_attention_rule(rule, *k, c);
  if (r.skipped) GTEST_SKIP() << *r.skipped;
  record(r.results);
  expect_pass(r.results);
}

class AttentionConformance : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionConformance, CacheOnMatchesCacheOff) { check("on_off", GetParam()); }
TEST_P(AttentionConformance, ChunkedMatchesOneShot) { check("chunked", GetParam()); }
TEST_P(AttentionConformance, UnusedSlotsNeverRead) { check("unused_slots", GetParam()); }
TEST_P(AttentionConformance, CapacityInvariant) { check("capacity", GetParam()); }

KVCONF_INSTANTIATE_SUITE_P(AttentionConformance,
                           ::testing::ValuesIn(all_pairs(registry().attention(), attention_cases())), ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionConformance);

// Batch invariance (docs/SCENARIOS.md "batch"): the case's last row decoded alone vs inside batched decode launches;
// its own suite name, so the per-case property sets of AttentionConformance stay what Python/parity compares.
class AttentionBatchInvariance : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionBatchInvariance, DecodeAloneMatchesInBatch) { check("batch", GetParam()); }

KVCONF_INSTANTIATE_SUITE_P(AttentionBatchInvariance,
                           ::testing::ValuesIn(all_pairs(registry().attention(), attention_cases())), ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionBatchInvariance);

class AttentionConformanceSeeds : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionConformanceSeeds, SlowManySeeds) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  for (const KernelRule& rule : attention_rules())  // every rule of the table that applies, 20 seeds each
    if (!attention_rule_skipped(rule.name, *k, c))
      sweep(rule.seed_name, c.id(), [&](std::uint64_t s) { return run_attention_rule(rule.name, *k, c, s).results; });
}

KVCONF_INSTANTIATE_SUITE_P(AttentionConformanceSeeds,
                           ::testing::ValuesIn(pairs_for_ids(registry().attention(), attention_cases(),
                                                             {"q16_kv128_d128_h8_gqa4_causal_win0_cap0_sc0_normal",
                                                              "q16_kv160_d256_h8_gqa2_causal_win64_cap0_sc50_normal",
                                                              "q1_kv512_d128_h8_gqa4_causal_win0_cap0_sc0_normal",
                                                              "q16_kv128_d128_h8_gqa2_causal_win0_cap0_sc0_p_flush",
                                                              "q12_kv80_d64_h4_gqa1_noncausal_win16_cap0_sc0_normal"})),
                           ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionConformanceSeeds);

}  // namespace
}  // namespace kvconf::conformance::suite
