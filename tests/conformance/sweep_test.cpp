// The kernel sweep (conformance/sweep.hpp): a fixed, filterable plan that covers every kernel and the standard shapes,
// items that run the suites' checks with the suites' seeds, seeds overridable, and unsupported cases skipped with
// the kernel's reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "kvconf/conformance/checks.hpp"
#include "kvconf/conformance/sweep.hpp"

namespace kvconf::conformance {
namespace {

const kernels::Registry& reg() {
  static const kernels::Registry r = kernels::cpu_registry();
  return r;
}

std::vector<std::string> keys(const std::vector<SweepItem>& plan) {
  std::vector<std::string> k;
  for (const auto& it : plan) k.push_back(it.key());
  return k;
}

const SweepItem& find_item(const std::vector<SweepItem>& plan, const std::string& kind) {
  for (const auto& it : plan)
    if (it.kind == kind) return it;
  throw std::runtime_error("no " + kind + " item in the plan");
}

TEST(Sweep, PlanIsFixedUniqueAndCoversEveryKernelAndKind) {
  SweepOptions o;
  o.quick = true;
  const auto a = sweep_plan(reg(), o), b = sweep_plan(reg(), o);
  EXPECT_EQ(keys(a), keys(b));
  const auto k = keys(a);
  EXPECT_EQ(std::set<std::string>(k.begin(), k.end()).size(), k.size()) << "duplicate keys";
  std::set<std::string> kernels, kinds;
  for (const auto& it : a) {
    kernels.insert(it.kernel);
    kinds.insert(it.kind);
    EXPECT_EQ(it.key(), it.kernel + "|" + it.case_id);
  }
  for (const auto& name : reg().names()) EXPECT_TRUE(kernels.count(name)) << name << " is not swept";
  EXPECT_EQ(kinds, (std::set<std::string>{"gemm", "projection", "norm", "attention"}));
}

TEST(Sweep, QuickIsAStrictSubsetOfFull) {
  SweepOptions q, f;
  q.quick = true;
  const auto quick = keys(sweep_plan(reg(), q)), full = keys(sweep_plan(reg(), f));
  const std::set<std::string> full_set(full.begin(), full.end());
  for (const auto& key : quick) EXPECT_TRUE(full_set.count(key)) << key;
  EXPECT_GT(full.size(), quick.size());
}

TEST(Sweep, FilterKeepsExactlyTheMatchingKeys) {
  SweepOptions all, f;
  all.quick = f.quick = true;
  f.filter = "a1_flash2";
  const auto every = keys(sweep_plan(reg(), all)), kept = keys(sweep_plan(reg(), f));
  std::vector<std::string> expected;
  std::copy_if(every.begin(), every.end(), std::back_inserter(expected),
               [](const std::string& k) { return k.find("a1_flash2") != std::string::npos; });
  EXPECT_FALSE(kept.empty());
  EXPECT_EQ(kept, expected);
  f.filter = "no-such-kernel-or-case";
  EXPECT_TRUE(sweep_plan(reg(), f).empty());
}

TEST(Sweep, QuickAttentionShapesCoverHeadDimsGqaWindowSoftcap) {
  std::set<std::size_t> dims, gqa, n_kv;
  bool window = false, softcap = false;
  for (const auto& c : sweep_attention_cases(true)) {
    const auto& s = c.call.shape;
    dims.insert(s.d);
    gqa.insert(s.n_heads / s.n_kv_heads);
    n_kv.insert(s.n_kv);
    window = window || c.call.params.window > 0;
    softcap = softcap || c.call.params.softcap > 0;
  }
  EXPECT_EQ(dims, (std::set<std::size_t>{64, 128, 256}));
  EXPECT_TRUE(gqa.count(1) && gqa.count(4));
  EXPECT_EQ(*n_kv.begin(), 16u);
  EXPECT_EQ(*n_kv.rbegin(), 512u);
  EXPECT_TRUE(window);
  EXPECT_TRUE(softcap);
}

TEST(Sweep, GemmItemRunsTheOracleRuleWithTheSuiteSeed) {
  SweepOptions o;
  o.quick = true;
  const auto plan = sweep_plan(reg(), o);
  const SweepItem& it = find_item(plan, "gemm");
  const auto r = run_sweep_item(reg(), it, o);
  EXPECT_EQ(r.key(), it.key());
  EXPECT_EQ(r.kind, "gemm");
  EXPECT_EQ(r.seq_len, it.gemm->shape.k);
  EXPECT_EQ(r.head_dim, 0u);
  EXPECT_FALSE(r.on_off.has_value());
  const auto direct =
      check_gemm_matches_oracle(*reg().find_gemm(it.kernel), *it.gemm, seed_for("gemm_oracle", it.case_id));
  ASSERT_EQ(r.rules.size(), direct.size());
  for (std::size_t i = 0; i < direct.size(); ++i) {
    EXPECT_EQ(r.rules[i].rule, direct[i].rule);
    EXPECT_EQ(r.rules[i].error, direct[i].error);
    EXPECT_EQ(r.rules[i].seed, direct[i].seed);
  }
}

TEST(Sweep, AttentionItemRunsEveryAttentionRuleAndMeasuresOnOff) {
  SweepOptions o;
  o.quick = true;
  o.filter = "cpu.attn.a6_eager.f16|";
  const auto plan = sweep_plan(reg(), o);
  const SweepItem& it = find_item(plan, "attention");
  const auto r = run_sweep_item(reg(), it, o);
  ASSERT_TRUE(r.skipped.empty()) << r.skipped;
  EXPECT_EQ(r.seq_len, it.attention->call.shape.n_kv);
  EXPECT_EQ(r.head_dim, it.attention->call.shape.d);
  std::set<std::string> rules;
  for (const auto& c : r.rules) rules.insert(c.rule);
  for (const char* want :
       {"oracle_bound", "two_sided", "chunked_bound.chunk1", "chunked_bound.chunk4", "chunked_bound.chunk16"})
    EXPECT_TRUE(rules.count(want)) << want << " missing; have:\n" << describe(r.rules);
  EXPECT_TRUE(rules.count("on_off_bound") || rules.count("on_off_bitwise")) << describe(r.rules);
  ASSERT_TRUE(r.on_off.has_value());
  const auto direct = measure_attention_on_off(*reg().find_attention(it.kernel), *it.attention,
                                               seed_for("attention_on_off", it.case_id));
  EXPECT_EQ(r.on_off->differing, direct.differing);
  EXPECT_EQ(r.on_off->max_ulp, direct.max_ulp);
}

TEST(Sweep, SeedOptionOverridesEveryRuleSeed) {
  SweepOptions o;
  o.quick = true;
  o.filter = "cpu.attn.a1_flash2.f16|";
  const auto plan = sweep_plan(reg(), o);
  const SweepItem& it = find_item(plan, "attention");
  o.seed = 12345;
  const auto r = run_sweep_item(reg(), it, o);
  ASSERT_FALSE(r.rules.empty());
  for (const auto& c : r.rules) EXPECT_EQ(c.seed, 12345u) << c.rule;
}

TEST(Sweep, UnsupportedCaseIsSkippedWithTheKernelsReason) {
  kernels::Registry r;
  kernels::GemmKernel k = *reg().find_gemm(reg().gemm().front().info.name);
  k.info.name = "test.gemm.refuses";
  k.supports = [](const kernels::GemmShape&) -> kernels::Reason { return std::string("refuses every shape"); };
  r.add(k);
  SweepOptions o;
  o.quick = true;
  const auto plan = sweep_plan(r, o);
  ASSERT_FALSE(plan.empty());
  for (const auto& it : plan) {
    const auto rec = run_sweep_item(r, it, o);
    EXPECT_EQ(rec.skipped, "refuses every shape") << it.key();
    EXPECT_TRUE(rec.rules.empty()) << it.key();
  }
}

TEST(Sweep, ItemOfAnotherRegistryThrows) {
  SweepOptions o;
  o.quick = true;
  const auto plan = sweep_plan(reg(), o);
  const kernels::Registry empty;
  EXPECT_THROW(run_sweep_item(empty, plan.front(), o), std::invalid_argument);
}

}  // namespace
}  // namespace kvconf::conformance
