// The rule tables (kernel_rules.hpp) are the one list every consumer runs: every rule of a table is a test of the
// suites, every rule test of the suites is a rule of a table, and on one kernel and case the kernel sweep's verdicts
// (the records of `kvconf kernels` / `kvconf run`) equal the suites' (their recorded error, bound and seed), rule for
// rule. Python's check_* call the same table runners (python/src/checks_bindings.cpp); Python/rules holds Python to
// the rule names.
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/kernel_rules.hpp"
#include "kvconf/conformance/sweep.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/number_text.hpp"

namespace {
std::string num17(double x) { return kvconf::num_exact(x); }  // as the suites record (suite_support.hpp)
}  // namespace

namespace kvconf::conformance {
namespace {

// stdout of a shell command.
std::string output_of(const std::string& cmd) {
  std::string out;
  if (std::FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

// "Suite.Test" of every test a suite program lists (the Cpu/ prefix and parameters dropped).
std::set<std::string> suite_tests(const std::string& exe) {
  std::set<std::string> tests;
  std::string suite;
  const std::string text = output_of("'" + exe + "' --gtest_list_tests");
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    if (line.rfind("Running main", 0) == 0 || line.empty()) continue;
    if (line[0] != ' ') {
      suite = line.substr(line.find('/') == std::string::npos ? 0 : line.find('/') + 1);
      if (!suite.empty() && suite.back() == '.') suite.pop_back();
    } else {
      const std::size_t b = line.find_first_not_of(' ');
      tests.insert(suite + "." + line.substr(b, line.find_first_of("/ ", b) - b));
    }
  }
  return tests;
}

const std::array<const char*, 5> kSuites = {KVCONF_SUITE_ATTENTION_CACHE, KVCONF_SUITE_ATTENTION_ORACLE,
                                            KVCONF_SUITE_GEMM, KVCONF_SUITE_NORM, KVCONF_SUITE_PROJECTION};

TEST(RuleAgreement, EveryRuleIsASuiteTestAndEverySuiteTestARule) {
  std::set<std::string> listed;  // what the suites run, rule tests only
  for (const char* exe : kSuites)
    for (const std::string& t : suite_tests(exe))
      if (t.find("Seeds.SlowManySeeds") == std::string::npos && t.find("Registry.") == std::string::npos)
        listed.insert(t);
  ASSERT_FALSE(listed.empty()) << "the suite programs listed no test";
  std::set<std::string> tabled;
  for (const auto* table : {&attention_rules(), &gemm_rules(), &projection_rules(), &norm_rules()})
    for (const KernelRule& r : *table) {
      tabled.insert(r.suite_test);
      EXPECT_TRUE(listed.count(r.suite_test)) << "rule '" << r.name << "' names suite test " << r.suite_test
                                              << ", which no suite program runs";
    }
  for (const std::string& t : listed)
    EXPECT_TRUE(tabled.count(t)) << "the suites run " << t << ", which is no rule of kernel_rules.hpp's tables";
}

// The values a suite program recorded for one kernel and case: property name -> value ("on_off_bound.error" -> ...).
std::map<std::string, std::string> suite_properties(const std::string& exe, const std::string& filter) {
  const std::string xml = ::testing::TempDir() + "rule_agreement_" + std::to_string(::getpid()) + ".xml";
  output_of("'" + exe + "' --gtest_filter='" + filter + "' --gtest_output=xml:'" + xml + "' > /dev/null 2>&1");
  std::map<std::string, std::string> props;
  const std::string text = output_of("cat '" + xml + "'");
  static const std::regex prop(R"re(<property name="([^"]+)" value="([^"]*)")re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), prop); it != std::sregex_iterator(); ++it)
    props[(*it)[1]] = (*it)[2];
  std::remove(xml.c_str());
  return props;
}

std::string sanitize(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// On one kernel and case of each kind: the sweep's rules are the suites' rules, with the same error, bound and seed.
TEST(RuleAgreement, SweepVerdictsEqualTheSuites) {
  const kernels::Registry reg = kernels::cpu_registry();
  struct Item {
    const char* kernel;
    const char* kind;
    std::string case_id;
    const char* exes[2];
  };
  const std::vector<Item> items = {
      {"cpu.attn.a1_flash2.f16", "attention", "q16_kv128_d128_h8_gqa4_causal_win0_cap0_sc0_normal",
       {KVCONF_SUITE_ATTENTION_ORACLE, KVCONF_SUITE_ATTENTION_CACHE}},
      {"cpu.attn.a7_fixedsplit.f16", "attention", "q12_kv80_d64_h4_gqa1_noncausal_win16_cap0_sc0_normal",
       {KVCONF_SUITE_ATTENTION_ORACLE, KVCONF_SUITE_ATTENTION_CACHE}},
      {"cpu.gemm.g1.f16", "gemm", gemm_cases()[1].id(), {KVCONF_SUITE_GEMM, nullptr}},
      {"cpu.norm.r1.f16", "norm", norm_cases()[0].id(), {KVCONF_SUITE_NORM, nullptr}},
  };
  for (const Item& it : items) {
    SCOPED_TRACE(std::string(it.kernel) + " on " + it.case_id);
    SweepItem si;
    si.kernel = it.kernel;
    si.kind = it.kind;
    si.case_id = it.case_id;
    if (std::string(it.kind) == "attention")
      for (const AttentionCase& c : attention_cases())
        if (c.id() == it.case_id) si.attention = c;
    if (std::string(it.kind) == "gemm") si.gemm = gemm_cases()[1];
    if (std::string(it.kind) == "norm") si.norm = norm_cases()[0];
    if (!reg.find_attention(it.kernel) && !reg.find_gemm(it.kernel) && !reg.find_norm(it.kernel)) {
      ADD_FAILURE() << "no kernel " << it.kernel << " in the CPU registry";
      continue;
    }
    const KernelCaseRecord rec = run_sweep_item(reg, si, SweepOptions{});
    ASSERT_TRUE(rec.skipped.empty()) << rec.skipped;
    std::map<std::string, std::string> suite;
    for (const char* exe : it.exes)
      if (exe)
        for (auto& [k, v] : suite_properties(exe, "*/*.*/" + sanitize(it.kernel) + "__" +
                                                      sanitize(it.case_id) + ":-*Seeds*"))
          suite[k] = v;
    std::set<std::string> suite_rules;
    for (const auto& [k, v] : suite)
      if (k.size() > 6 && k.compare(k.size() - 6, 6, ".error") == 0) suite_rules.insert(k.substr(0, k.size() - 6));
    std::set<std::string> sweep_rules;
    for (const results::CheckResult& r : rec.rules) {
      sweep_rules.insert(r.rule);
      EXPECT_EQ(suite[r.rule + ".error"], num17(r.error)) << r.rule;
      EXPECT_EQ(suite[r.rule + ".bound"], num17(r.bound)) << r.rule;
      EXPECT_EQ(suite[r.rule + ".seed"], std::to_string(r.seed)) << r.rule;
    }
    EXPECT_EQ(sweep_rules, suite_rules) << "the sweep and the suites ran different rules";
    std::printf("%s on %s: the sweep and the suites agree on %zu results\n", it.kernel, it.case_id.c_str(),
                rec.rules.size());
  }
}

}  // namespace
}  // namespace kvconf::conformance
