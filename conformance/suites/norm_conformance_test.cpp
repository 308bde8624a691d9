// Cpu/NormConformance.MatchesOracle/<kernel>__<case>: rule 1 (oracle accuracy, two-sided) for every RMSNorm kernel
// of the registry on every norm case; Cpu/NormConformanceSeeds.SlowManySeeds: the same over 20 seeds per case.
// Built with KVCONF_SUITE_GPU: the same over the GPU registry, prefix Cuda/ (conformance_gpu_*, label gpu).
#include "kvconf/conformance/kernel_rules.hpp"
#include "suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

using NormParam = Param<kernels::NormKernel, NormCase>;

class NormConformance : public ::testing::TestWithParam<NormParam> {};

TEST_P(NormConformance, MatchesOracle) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.shape)) GTEST_SKIP() << *why;
  const auto r = run_norm_rule("oracle", *k, c).results;  // kernel_rules.hpp's table
  record(r);
  expect_pass(r);
}

KVCONF_INSTANTIATE_SUITE_P(NormConformance, ::testing::ValuesIn(all_pairs(registry().norm(), norm_cases())),
                           ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(NormConformance);

class NormConformanceSeeds : public ::testing::TestWithParam<NormParam> {};

TEST_P(NormConformanceSeeds, SlowManySeeds) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.shape)) GTEST_SKIP() << *why;
  for (const KernelRule& rule : norm_rules())  // every rule of the table, 20 seeds each
    sweep(rule.seed_name, c.id(), [&](std::uint64_t s) { return run_norm_rule(rule.name, *k, c, s).results; });
}

KVCONF_INSTANTIATE_SUITE_P(NormConformanceSeeds,
                           ::testing::ValuesIn(pairs_for_ids(registry().norm(), norm_cases(),
                                                             {"r1_d4096_eps1e-06_llama_normal",
                                                              "r8_d2304_eps1e-06_gemma_wide_range",
                                                              "r4_d64_eps1e-05_llama_same_sign"})),
                           ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(NormConformanceSeeds);

KVCONF_REGISTRY_TEST(NormConformanceRegistry) { expect_registered(registry().norm(), "RMSNorm"); }

}  // namespace
}  // namespace kvconf::conformance::suite
