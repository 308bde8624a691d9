// The known-findings table (conformance/suites/known_findings.hpp): its entries name real cases at the seeds the
// suites use, a reproduced finding counts as expected, and a finding that no longer reproduces or moves fails.
#include "known_findings.hpp"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kvconf/conformance/cases.hpp"
#include "check_results.hpp"

namespace kvconf::conformance::suite {
namespace {

const KnownFinding& first() { return kKnownFindings[0]; }

CheckResults results_with(double error, bool pass, std::uint64_t seed) {
  CheckResult oracle = kvconf::testing::make_result("oracle_bound", true, 1e-7, 1e-3, 0.9999, seed, "");
  CheckResult two_sided =
      kvconf::testing::make_result(first().rule, pass, error, 1.09e-6, (1.09e-6 - error) / 1.09e-6, seed, "");
  return {oracle, two_sided};
}

// Each entry names a case of the attention table at the seed the attention_oracle suite gives it: a typo in the id
// or the seed would silently turn the expectation off and leave the finding red.
TEST(KnownFindings, EntriesNameRealCasesAtTheSuitesSeeds) {
  if (const char* s = std::getenv("KVCONF_SEED"); s != nullptr && *s != '\0')
    GTEST_SKIP() << "KVCONF_SEED is set: the suites' seeds are moved";
  const auto cases = attention_cases();
  for (const KnownFinding& f : kKnownFindings) {
    bool found = false;
    for (const auto& c : cases) found = found || c.id() == f.case_id;
    EXPECT_TRUE(found) << f.case_id << " is not in attention_cases()";
    EXPECT_EQ(f.seed, seed_for("attention_oracle", f.case_id)) << f.case_id;
    EXPECT_GT(f.error, 0.0);
    EXPECT_GT(f.rel_tol, 0.0);
    EXPECT_LT(f.rel_tol, 1e-3) << "a loose tolerance would not notice a changed kernel";
  }
}

TEST(KnownFindings, AReproducedFindingCountsAsExpected) {
  CheckResults r = results_with(first().error, false, first().seed);
  apply_known_findings(r, first().kernel, first().case_id);
  EXPECT_TRUE(all_pass(r));
  EXPECT_NE(r[1].detail.find("known finding"), std::string::npos);
}

TEST(KnownFindings, AFindingThatNoLongerReproducesFails) {
  CheckResults r = results_with(first().error, true, first().seed);
  EXPECT_NONFATAL_FAILURE(apply_known_findings(r, first().kernel, first().case_id), "no longer reproduces");
}

TEST(KnownFindings, AFindingThatMovedFails) {
  CheckResults r = results_with(first().error * (1.0 + 1e-6), false, first().seed);
  EXPECT_NONFATAL_FAILURE(apply_known_findings(r, first().kernel, first().case_id), "known finding moved");
}

// Another seed, another kernel or another case: nothing was measured there, so the rule stays gated.
TEST(KnownFindings, OtherwiseTheRuleStaysGated) {
  CheckResults at_other_seed = results_with(first().error, false, first().seed + 1);
  apply_known_findings(at_other_seed, first().kernel, first().case_id);
  EXPECT_FALSE(all_pass(at_other_seed));
  CheckResults other_kernel = results_with(first().error, false, first().seed);
  apply_known_findings(other_kernel, "torch.cuda.attn.sdpa_math.f32", first().case_id);
  EXPECT_FALSE(all_pass(other_kernel));
  CheckResults other_case = results_with(first().error, false, first().seed);
  apply_known_findings(other_case, first().kernel, "q1_kv1_d128_h4_gqa2_causal_win0_cap0_sc0_normal");
  EXPECT_FALSE(all_pass(other_case));
}

}  // namespace
}  // namespace kvconf::conformance::suite
