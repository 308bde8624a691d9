// Cpu/AttentionConformance.MatchesOracle/<kernel>__<case>: rule 1 (oracle accuracy, two-sided) for every attention
// kernel of the registry on every attention case.
#include "suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

using AttnParam = Param<kernels::AttentionKernel, AttentionCase>;

class AttentionConformance : public ::testing::TestWithParam<AttnParam> {};

TEST_P(AttentionConformance, MatchesOracle) {
  const auto& [k, c] = GetParam();
  if (auto why = k->supports(c.call)) GTEST_SKIP() << *why;
  const auto r = check_attention_matches_oracle(*k, c, seed_for("attention_oracle", c.id()));
  record(r);
  expect_pass(r);
}

INSTANTIATE_TEST_SUITE_P(Cpu, AttentionConformance,
                         ::testing::ValuesIn(all_pairs(registry().attention(), attention_cases())), ParamName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionConformance);

TEST(AttentionConformanceRegistry, HasCpuKernels) {
  EXPECT_FALSE(registry().attention().empty()) << "no CPU attention kernels registered";
}

}  // namespace
}  // namespace kvconf::conformance::suite
