// evaluate_rules on synthetic records: each model rule fails on the record that breaks it and passes otherwise;
// kernel cases give one verdict per rule result and a skipped verdict per unsupported case.
#include <gtest/gtest.h>

#include "kvconf/reports/report.hpp"
#include "synthetic_records.hpp"
#include "check_results.hpp"

namespace kvconf::reports {
namespace {

using test::synthetic_kernel;
using test::synthetic_pair;

const RuleVerdict* find(const std::vector<RuleVerdict>& v, const std::string& suite, const std::string& name) {
  for (const auto& x : v)
    if (x.suite == suite && x.name == name) return &x;
  return nullptr;
}

TEST(ReportRules, NearTieFlipsPassAndAWideMarginFlipFails) {
  ReportInput in;
  in.pairs.push_back(synthetic_pair("fixture:a", "fp16-eager", "greedy", 0, "ids:00", 8, 3, 1e-6, 2.0, 0.5));
  in.pairs.push_back(synthetic_pair("fixture:a", "fp16-eager", "greedy", 0, "ids:01", 8, std::nullopt, 1e-6, 0));
  auto v = evaluate_rules(in);
  const RuleVerdict* f = find(v, "model.fixture:a.fp16-eager", "FlipsAreNearTies");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->pass) << f->detail;
  EXPECT_DOUBLE_EQ(f->measured, 0.5);  // the flip's error/bound as built
  EXPECT_DOUBLE_EQ(f->threshold, 1.0);
  EXPECT_DOUBLE_EQ(f->headroom, 0.5);

  in.pairs.push_back(synthetic_pair("fixture:a", "fp16-eager", "greedy", 1, "ids:02", 8, 1, 1e-6, 2.0, 3.0));
  v = evaluate_rules(in);
  f = find(v, "model.fixture:a.fp16-eager", "FlipsAreNearTies");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->pass);
  EXPECT_DOUBLE_EQ(f->measured, 3.0);
  EXPECT_NE(f->detail.find("ids:02"), std::string::npos) << f->detail;
}

// The protocol records no near-tie results for the profile that is the rule's own fp32 reference: the verdict is
// skipped with the reason, not passed on no evidence; pairs that carry results are judged by them.
TEST(ReportRules, NearTieRuleSkippedOnlyWhereThePairsCarryNoResults) {
  ReportInput in;
  auto ref = synthetic_pair("m", "fp32", "greedy", 0, "ids:00", 8, std::nullopt, 1e-14, 0);
  ref.rules.clear();
  in.pairs.push_back(ref);
  auto v = evaluate_rules(in);
  const RuleVerdict* f = find(v, "model.m.fp32", "FlipsAreNearTies");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->skipped.empty());
  EXPECT_NE(f->skipped.find("fp32 reference"), std::string::npos) << f->skipped;

  in.pairs.push_back(synthetic_pair("m", "fp32", "greedy", 1, "ids:01", 8, 2, 1e-14, 1e-3, 3.0));  // has results
  v = evaluate_rules(in);
  f = find(v, "model.m.fp32", "FlipsAreNearTies");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->skipped.empty());
  EXPECT_FALSE(f->pass) << f->detail;  // the wide-margin flip is judged
}

TEST(ReportRules, Fp32GreedyDivergenceFails) {
  ReportInput in;
  in.pairs.push_back(synthetic_pair("m", "fp32", "greedy", 0, "ids:00", 8, std::nullopt, 1e-14, 0));
  in.pairs.push_back(synthetic_pair("m", "fp32", "topk", 0, "ids:00", 8, 5, 1e-14, 1e-3));  // not gated
  auto v = evaluate_rules(in);
  const RuleVerdict* t = find(v, "model.m.fp32", "Fp32TokensIdentical");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->pass) << t->detail;
  EXPECT_EQ(t->measured, 0.0);

  in.pairs.push_back(synthetic_pair("m", "fp32", "greedy", 1, "ids:01", 8, 6, 1e-14, 1e-3));
  v = evaluate_rules(in);
  t = find(v, "model.m.fp32", "Fp32TokensIdentical");
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->pass);
  EXPECT_EQ(t->measured, 1.0);
}

// Where fp16's KL is too small for the ratio, the fp32 records' noise floor (fp32_kl_floor) is the threshold; an fp32
// pair that flipped counts only its shared-context steps (docs/MODELS.md "Fp32KlRatio").
TEST(ReportRules, Fp32KlRatioUsesTheNoiseFloorAndTheSharedContext) {
  ReportInput in;
  in.pairs.push_back(synthetic_pair("m", "fp16-eager", "greedy", 0, "ids:00", 8, 2, 1e-6, 1e-4));
  in.pairs.push_back(synthetic_pair("m", "fp32", "greedy", 0, "ids:00", 8, std::nullopt, 1e-12, 0));
  const auto& p16 = in.pairs[0].free.kl;
  double kl16 = 0;
  for (double x : p16) kl16 += x;
  kl16 /= double(p16.size());
  ASSERT_GT(1e-12 / kl16, 1e-8) << "the synthetic fp16 KL must be small enough for the ratio to fail";
  auto v = evaluate_rules(in);
  const RuleVerdict* r = find(v, "model.m.fp32", "Fp32KlRatio");
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->pass) << "without a floor the ratio decides: " << r->detail;
  in.pairs[1].fp32_kl_floor = 1e-10;  // a floor above the fp32 KL: the threshold becomes floor / KL16
  v = evaluate_rules(in);
  r = find(v, "model.m.fp32", "Fp32KlRatio");
  EXPECT_TRUE(r->pass) << r->detail;
  EXPECT_DOUBLE_EQ(r->threshold, 1e-10 / kl16);
  in.pairs[1].fp32_kl_floor = 1e-13;  // a floor below the fp32 KL (and below 1e-8 × KL16): the ratio decides again
  v = evaluate_rules(in);
  r = find(v, "model.m.fp32", "Fp32KlRatio");
  EXPECT_FALSE(r->pass) << r->detail;
  EXPECT_DOUBLE_EQ(r->threshold, 1e-8);
  // An fp32 pair that flipped at step 1 under sampling: only steps 0 and 1 count (the rest measure other contexts).
  in.pairs[1] = synthetic_pair("m", "fp32", "topk", 0, "ids:00", 8, 1, 1e-16, 5.0);
  in.pairs[0] = synthetic_pair("m", "fp16-eager", "topk", 0, "ids:00", 8, 2, 1e-6, 1.0);
  v = evaluate_rules(in);
  r = find(v, "model.m.fp32", "Fp32KlRatio");
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->pass) << r->detail;
}

TEST(ReportRules, Fp32KlRatioOverTheFp16DivergedPrompts) {
  ReportInput in;
  // fp16 diverges on ids:00 (mean KL (7·1e-6 + ... ) and not on ids:01; fp32 stays near 1e-16 per step.
  in.pairs.push_back(synthetic_pair("m", "fp16-eager", "greedy", 0, "ids:00", 8, 2, 1e-6, 1.0));
  in.pairs.push_back(synthetic_pair("m", "fp16-eager", "greedy", 0, "ids:01", 8, std::nullopt, 1e-6, 0));
  in.pairs.push_back(synthetic_pair("m", "fp32", "greedy", 0, "ids:00", 8, std::nullopt, 1e-16, 0));
  in.pairs.push_back(
      synthetic_pair("m", "fp32", "greedy", 0, "ids:01", 8, std::nullopt, 1.0, 0));  // not diverged in fp16: ignored
  auto v = evaluate_rules(in);
  const RuleVerdict* r = find(v, "model.m.fp32", "Fp32KlRatio");
  ASSERT_NE(r, nullptr);
  // Only ids:00 counts: fp32 mean KL 1e-16; fp16 mean KL over its 8 steps computed here independently.
  const auto& p16 = in.pairs[0].free.kl;
  double kl16 = 0;
  for (double x : p16) kl16 += x;
  kl16 /= double(p16.size());
  EXPECT_TRUE(r->skipped.empty()) << r->skipped;
  EXPECT_NEAR(r->measured, 1e-16 / kl16, 1e-12 * (1e-16 / kl16));
  EXPECT_TRUE(r->pass) << r->detail;
  EXPECT_DOUBLE_EQ(r->threshold, 1e-8);

  in.pairs[2] = synthetic_pair("m", "fp32", "greedy", 0, "ids:00", 8, std::nullopt, 1e-6, 0);  // fp32 as bad as fp16
  v = evaluate_rules(in);
  r = find(v, "model.m.fp32", "Fp32KlRatio");
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->pass) << r->detail;

  in.pairs[0] = synthetic_pair("m", "fp16-eager", "greedy", 0, "ids:00", 8, std::nullopt, 1e-6, 0);
  v = evaluate_rules(in);
  r = find(v, "model.m.fp32", "Fp32KlRatio");
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->skipped.empty()) << "no fp16 divergence: not applicable";
}

TEST(ReportRules, InvariantProfileWithOneNonzeroKlStepFails) {
  ReportInput in;
  in.pairs.push_back(synthetic_pair("m", "fp16-invariant", "greedy", 0, "ids:00", 8, std::nullopt, 0.0, 0));
  in.pairs.push_back(synthetic_pair("m", "fp16-invariant", "topp", 3, "ids:01", 8, std::nullopt, 0.0, 0));
  auto v = evaluate_rules(in);
  const RuleVerdict* r = find(v, "model.m.fp16-invariant", "InvariantBitwise");
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->pass) << r->detail;
  EXPECT_EQ(r->measured, 0.0);

  in.pairs[1].teacher.kl[5] = 1e-12;  // one step, teacher-forced regime
  v = evaluate_rules(in);
  r = find(v, "model.m.fp16-invariant", "InvariantBitwise");
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->pass);
  EXPECT_EQ(r->measured, 1.0);
  EXPECT_NE(r->detail.find("step 5"), std::string::npos) << r->detail;
}

TEST(ReportRules, NoFp32OrInvariantRulesForOtherProfiles) {
  ReportInput in;
  in.pairs.push_back(synthetic_pair("m", "fp16-flash2", "greedy", 0, "ids:00", 4, 1, 1e-6, 1.0));
  const auto v = evaluate_rules(in);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].name, "FlipsAreNearTies");
}

// A scenario's pairs ("<profile>+<scenario>", kvconf model --scenario) get ScenarioRules, failing on any failed pair
// rule and counting each rule; the fp32 falsification rules are not applied to fp32's scenario pairs (they carry no
// noise floor, and the paper's rules judge the cache pair: on stories260K, Fp32KlRatio failed fp32+batch before).
TEST(ReportRules, ScenarioProfilesGetScenarioRulesNotTheFp32Rules) {
  ReportInput in;
  in.pairs.push_back(synthetic_pair("m", "fp16-eager+batch", "greedy", 0, "ids:00", 8, std::nullopt, 1e-6, 1e-3));
  in.pairs.push_back(synthetic_pair("m", "fp32+batch", "greedy", 0, "ids:00", 8, std::nullopt, 1e-6, 1e-3));
  for (auto& p : in.pairs)
    p.rules.push_back(kvconf::testing::make_result("cached_kv", true, 0.0, 0.0, 1.0, 1, "equal"));
  auto v = evaluate_rules(in);
  EXPECT_EQ(find(v, "model.m.fp32+batch", "Fp32KlRatio"), nullptr);
  EXPECT_EQ(find(v, "model.m.fp32+batch", "Fp32TokensIdentical"), nullptr);
  const RuleVerdict* r = find(v, "model.m.fp16-eager+batch", "ScenarioRules");
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->pass) << r->detail;
  EXPECT_NE(r->detail.find("cached_kv 0/1 failing"), std::string::npos) << r->detail;
  in.pairs[0].rules.back().pass = false;
  v = evaluate_rules(in);
  r = find(v, "model.m.fp16-eager+batch", "ScenarioRules");
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->pass);
  EXPECT_NE(r->detail.find("cached_kv 1/1 failing"), std::string::npos) << r->detail;
}

TEST(ReportRules, KernelVerdictPerCheckResultAndSkippedCases) {
  ReportInput in;
  in.kernels.push_back(synthetic_kernel("cpu.attn.a1_flash2.f16", "attention", 64, 128, 0.25));
  in.kernels.push_back(synthetic_kernel("cpu.attn.a1_flash2.f16", "attention", 128, 128, 1.5));
  in.kernels.push_back(synthetic_kernel("cpu.attn.a1_flash2.f16", "attention", 16, 512, 0, "head_dim 512 unsupported"));
  const auto v = evaluate_rules(in);
  ASSERT_EQ(v.size(), 5u);  // 2 rules × 2 cases + 1 skipped
  const RuleVerdict* ok = find(v, "kernels.cpu.attn.a1_flash2.f16", "oracle_bound/f16_acc32_n64_d128");
  const RuleVerdict* bad = find(v, "kernels.cpu.attn.a1_flash2.f16", "oracle_bound/f16_acc32_n128_d128");
  const RuleVerdict* skip = find(v, "kernels.cpu.attn.a1_flash2.f16", "f16_acc32_n16_d512");
  ASSERT_TRUE(ok && bad && skip);
  EXPECT_TRUE(ok->pass);
  EXPECT_DOUBLE_EQ(ok->measured / ok->threshold, 0.25);
  EXPECT_DOUBLE_EQ(ok->headroom, 0.75);
  EXPECT_FALSE(bad->pass);
  EXPECT_EQ(skip->skipped, "head_dim 512 unsupported");
}

}  // namespace
}  // namespace kvconf::reports
