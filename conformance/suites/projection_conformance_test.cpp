// Cpu/ProjectionConformance.CacheOnMatchesCacheOff/<kernel>__<case>: rule 2 for projections — the K/V rows of a
// sequence from the prompt prefill (M = prompt) and decode steps (M = 1) vs the full-prefix GEMM (M = total),
// within the sum of the two paths' bounds, bitwise for cache-invariant kernels; plus the 20-seed sweep.
// Built with KVCONF_SUITE_GPU: the same over the GPU registry, prefix Cuda/ (conformance_gpu_*, label gpu).
#include "kvconf/conformance/kernel_rules.hpp"
#include "suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

using ProjParam = Param<kernels::GemmKernel, ProjectionCase>;

kernels::Reason unsupported(const kernels::GemmKernel& k, const ProjectionCase& c) {
  for (std::size_t m : {c.total, c.prompt, std::size_t{1}})
    if (auto why = k.supports({m, c.n, c.k})) return why;
  return std::nullopt;
}

class ProjectionConformance : public ::testing::TestWithParam<ProjParam> {};

TEST_P(ProjectionConformance, CacheOnMatchesCacheOff) {
  const auto& [k, c] = GetParam();
  if (auto why = unsupported(*k, c)) GTEST_SKIP() << *why;
  const auto r = run_projection_rule("on_off", *k, c).results;  // kernel_rules.hpp's table
  record(r);
  expect_pass(r);
}

KVCONF_INSTANTIATE_SUITE_P(ProjectionConformance, ::testing::ValuesIn(all_pairs(registry().gemm(), projection_cases())),
                           ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ProjectionConformance);

class ProjectionConformanceSeeds : public ::testing::TestWithParam<ProjParam> {};

TEST_P(ProjectionConformanceSeeds, SlowManySeeds) {
  const auto& [k, c] = GetParam();
  if (auto why = unsupported(*k, c)) GTEST_SKIP() << *why;
  for (const KernelRule& rule : projection_rules())  // every rule of the table, 20 seeds each
    sweep(rule.seed_name, c.id(), [&](std::uint64_t s) { return run_projection_rule(rule.name, *k, c, s).results; });
}

KVCONF_INSTANTIATE_SUITE_P(ProjectionConformanceSeeds,
                           ::testing::ValuesIn(pairs_for_ids(registry().gemm(), projection_cases(),
                                                             {"p8_t16_n256_k1024_normal", "p5_t9_n128_k4096_normal",
                                                              "p4_t8_n64_k2048_wide_range"})),
                           ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ProjectionConformanceSeeds);

}  // namespace
}  // namespace kvconf::conformance::suite
