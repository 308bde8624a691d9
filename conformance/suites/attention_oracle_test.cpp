// Cpu/AttentionConformance.MatchesOracle/<kernel>__<case>: rule 1 (oracle accuracy, two-sided) for every attention
// kernel of the registry on every attention case.
// Built with KVCONF_SUITE_GPU: the same over the GPU registry, prefix Cuda/ (conformance_gpu_*, label gpu).
#include "known_findings.hpp"
#include "kvconf/conformance/kernel_rules.hpp"
#include "suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

using AttnParam = Param<kernels::AttentionKernel, AttentionCase>;

class AttentionConformance : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionConformance, MatchesOracle) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  auto r = run_attention_rule("oracle", *k, c).results;  // kernel_rules.hpp's table
  record(r);
  apply_known_findings(r, k->info.name, c.id());
  expect_pass(r);
}

KVCONF_INSTANTIATE_SUITE_P(AttentionConformance,
                           ::testing::ValuesIn(all_pairs(registry().attention(), attention_cases())), ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionConformance);

KVCONF_REGISTRY_TEST(AttentionConformanceRegistry) { expect_registered(registry().attention(), "attention"); }

}  // namespace
}  // namespace kvconf::conformance::suite
