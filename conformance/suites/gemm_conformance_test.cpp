// Cpu/GemmConformance.MatchesOracle/<kernel>__<case>: rule 1 (oracle accuracy, two-sided) for every GEMM kernel of
// the registry on every GEMM case; Cpu/GemmConformance.BatchInvariant: each row of the case's M-row call vs alone;
// Cpu/GemmConformanceSeeds.SlowManySeeds: the same over 20 seeds per case. Built with KVCONF_SUITE_GPU: the same over
// the GPU registry, prefix Cuda/ (conformance_gpu_*, label gpu).
#include "kvconf/conformance/kernel_rules.hpp"
#include "suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

using GemmParam = Param<kernels::GemmKernel, GemmCase>;

class GemmConformance : public ::testing::TestWithParam<GemmParam> {};

TEST_P(GemmConformance, MatchesOracle) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.shape)) GTEST_SKIP() << *why;
  const auto r = run_gemm_rule("oracle", *k, c).results;  // kernel_rules.hpp's table
  record(r);
  expect_pass(r);
}

// A row inside an M-row call vs alone: bitwise for kernels claiming invariance, bounded otherwise (M = 1 cases have
// nothing to compare and skip).
TEST_P(GemmConformance, BatchInvariant) {
  const auto& [k, c] = GetParam();
  if (c.shape.m < 2) GTEST_SKIP() << "M = 1: no batch to compare with";
  if (auto why = k->supports(c.shape)) GTEST_SKIP() << *why;
  const auto r = run_gemm_rule("batch", *k, c).results;
  record(r);
  expect_pass(r);
}

KVCONF_INSTANTIATE_SUITE_P(GemmConformance, ::testing::ValuesIn(all_pairs(registry().gemm(), gemm_cases())),
                           ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GemmConformance);

class GemmConformanceSeeds : public ::testing::TestWithParam<GemmParam> {};

TEST_P(GemmConformanceSeeds, SlowManySeeds) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.shape)) GTEST_SKIP() << *why;
  for (const KernelRule& rule : gemm_rules())  // every rule of the table that applies, 20 seeds each
    if (!gemm_rule_skipped(rule.name, *k, c))
      sweep(rule.seed_name, c.id(), [&](std::uint64_t s) { return run_gemm_rule(rule.name, *k, c, s).results; });
}

KVCONF_INSTANTIATE_SUITE_P(GemmConformanceSeeds,
                           ::testing::ValuesIn(pairs_for_ids(registry().gemm(), gemm_cases(),
                                                             {"m1_n256_k1024_normal", "m33_n64_k4096_normal",
                                                              "m8_n64_k2048_wide_range", "m1_n64_k4096_same_sign"})),
                           ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GemmConformanceSeeds);

// The suite is only as good as the registry it runs over.
KVCONF_REGISTRY_TEST(GemmConformanceRegistry) { expect_registered(registry().gemm(), "GEMM"); }

}  // namespace
}  // namespace kvconf::conformance::suite
