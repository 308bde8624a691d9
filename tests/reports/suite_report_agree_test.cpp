// One verdict per model rule: the suites' verdict (conformance/suites: the model_rules.hpp function called on the
// records of one case, with the suite's fp16 partner) and the report's (reports::evaluate_rules: the records grouped by
// model and profile, the partner chosen among the profiles present) agree, for FlipsAreNearTies, Fp32TokensIdentical
// and Fp32KlRatio, on records built to sit where the two could part: a pair without its fp32 noise floor, fp16's KL
// too small for the paper's ratio, the CUDA profile names, a failing near-tie rule, a greedy fp32 flip. Before the
// rules had one implementation this failed on one_floor_missing and cuda_profiles (docs/CONFORMANCE.md).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "kvconf/conformance/model_rules.hpp"
#include "kvconf/results/records.hpp"
#include "kvconf/reports/report.hpp"
#include "check_results.hpp"

namespace kvconf {
namespace {

using results::RunPairRecord;

RunPairRecord pair(const std::string& profile, const std::string& prompt, std::vector<double> kl,
                   std::optional<std::size_t> flip, std::optional<double> floor = std::nullopt,
                   const std::string& strategy = "greedy") {
  RunPairRecord r;
  r.model = "fixture:test";
  r.profile = profile;
  r.strategy = strategy;
  r.prompt_id = prompt;
  r.seed = 0;
  r.free.kl = std::move(kl);
  r.free.flip = flip;
  r.free.tokens_on = {1, 2, 3};
  r.free.tokens_off = flip ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2, 3};
  r.fp32_kl_floor = floor;
  return r;
}

std::vector<const RunPairRecord*> ptrs(const std::vector<RunPairRecord>& v) {
  std::vector<const RunPairRecord*> out;
  for (const auto& r : v) out.push_back(&r);
  return out;
}

std::optional<bool> verdict_of(const results::RuleVerdict& v) {
  if (!v.skipped.empty()) return std::nullopt;
  return v.pass;
}

// As Fp32Conformance calls it: the fp16 partner of its profile among the two it knows.
std::optional<bool> suite_fp32_kl_ratio(const std::vector<RunPairRecord>& p32, const std::vector<RunPairRecord>& p16) {
  const std::string profile = p32.front().profile;
  const std::string partner = conformance::fp16_partner(profile, {"fp16-eager", "cuda-fp16"});
  return verdict_of(conformance::fp32_kl_ratio(conformance::model_rule_suite("fixture:test", profile), partner,
                                               ptrs(p32), ptrs(p16)));
}

// The report's verdict named `rule` for `profile`: nullopt when the report gives none or skips it.
std::optional<bool> report_verdict(const std::vector<RunPairRecord>& pairs, const std::string& profile,
                                   const std::string& rule) {
  reports::ReportInput in;
  in.pairs = pairs;
  for (const reports::RuleVerdict& v : reports::evaluate_rules(in))
    if (v.suite == "model.fixture:test." + profile && v.name == rule) {
      if (!v.skipped.empty()) return std::nullopt;
      return v.pass;
    }
  return std::nullopt;
}

struct KlScenario {
  const char* name;
  const char* fp32;
  const char* fp16;
  std::vector<RunPairRecord> p32, p16;
};

std::vector<KlScenario> kl_scenarios() {
  std::vector<KlScenario> v;
  // fp16's KL (1e-6) is too small for the ratio (1e-14 bound); the floors (4e-12, 2e-12) are fp32's bound, and
  // fp32's KL (1e-12) is inside it.
  v.push_back({"floor_is_the_bound",
               "fp32",
               "fp16-eager",
               {pair("fp32", "a", {1e-12}, std::nullopt, 4e-12), pair("fp32", "b", {1e-12}, std::nullopt, 2e-12)},
               {pair("fp16-eager", "a", {1e-6}, 0), pair("fp16-eager", "b", {1e-6}, 0)}});
  // The same with one record lacking its floor (an older record).
  v.push_back({"one_floor_missing",
               "fp32",
               "fp16-eager",
               {pair("fp32", "a", {1e-12}, std::nullopt, 4e-12), pair("fp32", "b", {1e-12}, std::nullopt)},
               {pair("fp16-eager", "a", {1e-6}, 0), pair("fp16-eager", "b", {1e-6}, 0)}});
  // fp32's KL past both the ratio and the floor: both must fail.
  v.push_back({"past_the_floor",
               "fp32",
               "fp16-eager",
               {pair("fp32", "a", {1e-9}, std::nullopt, 4e-12)},
               {pair("fp16-eager", "a", {1e-6}, 0)}});
  // The CUDA profiles: cuda-fp32 is judged against cuda-fp16, as Cuda/Fp32Conformance does.
  v.push_back({"cuda_profiles",
               "cuda-fp32",
               "cuda-fp16",
               {pair("cuda-fp32", "a", {1e-12}, std::nullopt, 4e-12)},
               {pair("cuda-fp16", "a", {1e-6}, 0)}});
  return v;
}

TEST(SuiteReportAgree, Fp32KlRatio) {
  for (const KlScenario& s : kl_scenarios()) {
    std::vector<RunPairRecord> all = s.p32;
    all.insert(all.end(), s.p16.begin(), s.p16.end());
    const std::optional<bool> suite = suite_fp32_kl_ratio(s.p32, s.p16);
    const std::optional<bool> report = report_verdict(all, s.fp32, "Fp32KlRatio");
    ASSERT_TRUE(suite.has_value()) << s.name << ": the scenario must apply the rule";
    EXPECT_EQ(report, suite) << s.name << ": the suite says " << (*suite ? "pass" : "FAIL") << ", the report "
                             << (report ? (*report ? "pass" : "FAIL") : "nothing");
  }
}

TEST(SuiteReportAgree, FlipsAreNearTies) {
  const results::CheckResult near_tie = kvconf::testing::make_result("flip_near_tie", true, 0.5, 1.0, 0.5, 0, "");
  const results::CheckResult past = kvconf::testing::make_result("flip_near_tie", false, 1.5, 1.0, -0.5, 0, "");
  for (const auto& rules : {std::vector{near_tie}, std::vector{past}, std::vector{near_tie, past}}) {
    std::vector<RunPairRecord> pairs;
    for (std::size_t i = 0; i < rules.size(); ++i) {
      pairs.push_back(pair("fp16-eager", "p" + std::to_string(i), {1e-3}, 0));
      pairs.back().rules = {rules[i]};
    }
    const auto suite = verdict_of(
        conformance::flips_are_near_ties(conformance::model_rule_suite("fixture:test", "fp16-eager"), ptrs(pairs)));
    ASSERT_TRUE(suite.has_value());
    EXPECT_EQ(report_verdict(pairs, "fp16-eager", "FlipsAreNearTies"), suite) << rules.size() << " pairs";
  }
}

TEST(SuiteReportAgree, Fp32TokensIdentical) {
  for (const char* profile : {"fp32", "cuda-fp32"})
    for (const char* strategy : {"greedy", "topk"})
      for (bool flip : {false, true}) {
        const std::vector<RunPairRecord> pairs = {
            pair(profile, "a", {1e-12}, flip ? std::optional<std::size_t>(1) : std::nullopt, 1e-11, strategy)};
        const auto suite = verdict_of(
            conformance::fp32_tokens_identical(conformance::model_rule_suite("fixture:test", profile), ptrs(pairs)));
        EXPECT_EQ(report_verdict(pairs, profile, "Fp32TokensIdentical"), suite)
            << profile << " " << strategy << (flip ? " with" : " without") << " a flip";
      }
}

// The report's partner choice agrees with the suites' where both exist, and falls back to another fp16 profile of
// the same device (never across devices).
TEST(SuiteReportAgree, Fp16Partner) {
  EXPECT_EQ(conformance::fp16_partner("fp32", {"fp16-flash2", "fp16-eager", "fp32"}), "fp16-eager");
  EXPECT_EQ(conformance::fp16_partner("fp32", {"fp16-flash2", "fp32"}), "fp16-flash2");
  EXPECT_EQ(conformance::fp16_partner("cuda-fp32", {"cuda-fp16", "fp16-eager"}), "cuda-fp16");
  EXPECT_EQ(conformance::fp16_partner("cuda-fp32", {"fp16-eager"}), "");
  EXPECT_EQ(conformance::fp16_partner("fp32", {"cuda-fp16"}), "");
  EXPECT_TRUE(conformance::is_fp32_reference_profile("cuda-fp32"));
  EXPECT_FALSE(conformance::is_fp32_reference_profile("cuda-fp16"));
}

}  // namespace
}  // namespace kvconf
