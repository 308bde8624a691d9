// Rule 2 for attention, every kernel of the registry on every attention case:
//   Cpu/AttentionConformance.CacheOnMatchesCacheOff  decode row vs the last prefill row
//   Cpu/AttentionConformance.ChunkedMatchesOneShot   chunked prefill (chunks of 1, 4, 16 rows) vs one shot
//   Cpu/AttentionConformance.UnusedSlotsNeverRead    NaN in cache rows [n_kv, capacity) never reaches the output
//   Cpu/AttentionConformance.CapacityInvariant       cache-invariant kernels: output independent of capacity
// each within the sum of the paths' bounds, or bitwise for cache-invariant kernels; and
// Cpu/AttentionConformanceSeeds.SlowManySeeds: every attention rule (oracle included) over 20 seeds per case.
// Built with KVCONF_SUITE_GPU: the same over the GPU registry, prefix Cuda/ (conformance_gpu_*, label gpu).
#include <array>

#include "suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

using AttnParam = Param<kernels::AttentionKernel, AttentionCase>;
constexpr std::array<std::size_t, 3> kChunks = {1, 4, 16};

std::vector<std::string> chunk_names() {
  std::vector<std::string> q;
  for (std::size_t ch : kChunks) q.push_back("chunk" + std::to_string(ch));
  return q;
}

class AttentionConformance : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionConformance, CacheOnMatchesCacheOff) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  const auto r = check_attention_cache_on_off(*k, c, seed_for("attention_on_off", c.id()));
  record(r);
  expect_pass(r);
}

TEST_P(AttentionConformance, ChunkedMatchesOneShot) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  const auto r = check_attention_chunked(*k, c, kChunks, seed_for("attention_chunked", c.id()));
  record(r, chunk_names());
  expect_pass(r);
}

TEST_P(AttentionConformance, UnusedSlotsNeverRead) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  const auto r = check_attention_unused_slots(*k, c, seed_for("attention_unused_slots", c.id()));
  record(r);
  expect_pass(r);
}

TEST_P(AttentionConformance, CapacityInvariant) {
  const auto& [k, c] = GetParam();
  if (!k->info.cache_invariant) GTEST_SKIP() << k->info.name << " does not claim cache_invariant";
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  const auto r = check_attention_capacity(*k, c, seed_for("attention_capacity", c.id()));
  record(r);
  expect_pass(r);
}

KVCONF_INSTANTIATE_SUITE_P(AttentionConformance,
                           ::testing::ValuesIn(all_pairs(registry().attention(), attention_cases())), ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionConformance);

// Batch invariance (docs/SCENARIOS.md "batch"): the case's last row decoded alone vs inside batched decode launches;
// its own suite name, so the per-case property sets of AttentionConformance stay what Python/parity compares.
class AttentionBatchInvariance : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionBatchInvariance, DecodeAloneMatchesInBatch) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  if (auto why = attention_batch_unchecked(*k, c)) GTEST_SKIP() << k->info.name << " " << *why;
  const auto r = check_attention_batch_invariance(*k, c, seed_for("attention_batch", c.id()));
  record(r);
  expect_pass(r);
}

KVCONF_INSTANTIATE_SUITE_P(AttentionBatchInvariance,
                           ::testing::ValuesIn(all_pairs(registry().attention(), attention_cases())), ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionBatchInvariance);

class AttentionConformanceSeeds : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionConformanceSeeds, SlowManySeeds) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  const std::string id = c.id();
  sweep("attention_oracle", id, [&](std::uint64_t s) { return check_attention_matches_oracle(*k, c, s); });
  sweep("attention_on_off", id, [&](std::uint64_t s) { return check_attention_cache_on_off(*k, c, s); });
  sweep("attention_chunked", id, [&](std::uint64_t s) { return check_attention_chunked(*k, c, kChunks, s); });
  sweep("attention_unused_slots", id, [&](std::uint64_t s) { return check_attention_unused_slots(*k, c, s); });
  if (k->info.cache_invariant)
    sweep("attention_capacity", id, [&](std::uint64_t s) { return check_attention_capacity(*k, c, s); });
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
