// kvconf model --experiment as a library (kvconf/protocol/experiments.hpp) on the tiny fixtures: every experiment's
// rules pass on clean runs and each rule fails under the planted fault it is meant to catch; shards partition the
// records and --resume redoes nothing; bad names and bad records are BadInput; the report carries the experiments.
#include "kvconf/protocol/experiments.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bad_input_message.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/reports/report.hpp"
#include "temp_dir.hpp"

namespace kvconf::protocol {
namespace {

namespace fs = std::filesystem;

ProtocolOptions tiny(const std::string& fixture, const fs::path& out, std::size_t n = 3, std::size_t steps = 12) {
  ProtocolOptions o;
  o.model = "fixture:" + fixture;
  if (fixture.find("-obs-") != std::string::npos) {  // not a protocol fixture name: by path, with the tiny prompts
    o.model = (fs::path(KVCONF_FIXTURES_DIR) / "models" / fixture).string();
    o.prompts = "ids:" + (fs::path(KVCONF_FIXTURES_DIR) / "prompts" / "gsm8k.json").string();
  }
  o.profiles = {"fp16-eager"};
  o.strategies = {"greedy"};
  o.n = n;
  o.seeds = {0};
  o.max_new_tokens = steps;
  o.out = out;
  o.fixtures_dir = KVCONF_FIXTURES_DIR;
  o.shared_dir = KVCONF_SHARED_DIR;
  return o;
}

bool have(const std::string& fixture) {
  return fs::exists(fs::path(KVCONF_FIXTURES_DIR) / "models" / fixture / "config.json");
}
#define NEED(fixture) \
  if (!have(fixture)) GTEST_SKIP() << fixture << " fixture missing under " << KVCONF_FIXTURES_DIR

// rule -> passed, over every summary's verdicts.
std::map<std::string, bool> verdicts(const ExperimentsResult& r) {
  std::map<std::string, bool> out;
  for (const auto& s : r.summaries)
    for (const auto& v : s.verdicts) out[v.result.rule] = v.result.pass;
  return out;
}

nlohmann::json timeless(nlohmann::json j) {
  j.erase("seconds");
  return j;
}

TEST(Experiments, CleanRunsPassEveryRuleAndEveryExperimentReports) {
  NEED("llama2-tiny");
  const fs::path out = test::temp_dir("kvconf_exp");
  const ExperimentsResult r = run_experiments(tiny("llama2-tiny", out), {"all"});
  ASSERT_EQ(r.summaries.size(), experiment_names().size());
  EXPECT_EQ(r.records.size(), 3u * experiment_names().size());
  for (const auto& s : r.summaries) {
    EXPECT_FALSE(s.verdicts.empty()) << s.name << " has no gating rule";
    EXPECT_FALSE(s.rows.empty()) << s.name;
    EXPECT_FALSE(s.plots.empty()) << s.name;
    EXPECT_GT(s.seconds, 0.0) << s.name;
    for (const auto& v : s.verdicts) EXPECT_TRUE(v.result.pass) << v.suite << " " << v.result.rule << ": " << v.result.detail;
  }
  const std::map<std::string, bool> v = verdicts(r);
  for (const char* rule : {"step0_logits_bitwise", "all_layers_patch_reproduces_step", "kv_patch_all_within_step_error",
                           "layer0_v_within_gemm_bounds", "quantizer_within_step",
                           "u_noise_perturbation_rounding_sized"})
    EXPECT_TRUE(v.count(rule)) << rule << " was not evaluated";
  // The report carries every experiment: its table in report.md, its verdicts in junit.xml.
  reports::ReportInput in;
  in.title = "experiments";
  in.experiments = r.summaries;
  reports::write_report(in, out / "report");
  std::ifstream md(out / "report" / "report.md"), junit(out / "report" / "junit.xml");
  std::stringstream m, j;
  m << md.rdbuf();
  j << junit.rdbuf();
  for (const std::string& name : experiment_names()) {
    EXPECT_NE(m.str().find("Experiment " + name), std::string::npos) << name;
    EXPECT_NE(j.str().find("experiment." + name), std::string::npos) << name;
  }
}

struct PlantCase {
  const char* fixture;
  const char* experiment;
  const char* rule;
  ExperimentPlants plants;
};

class ExperimentRulesCatch : public ::testing::TestWithParam<PlantCase> {};

TEST_P(ExperimentRulesCatch, ThePlantedFault) {
  const PlantCase& c = GetParam();
  NEED(std::string(c.fixture));
  ProtocolOptions o = tiny(c.fixture, test::temp_dir("kvconf_exp"), 2, 8);
  const ExperimentsResult clean = run_experiments(o, {c.experiment});
  ASSERT_TRUE(verdicts(clean).count(c.rule)) << c.rule;
  EXPECT_TRUE(verdicts(clean).at(c.rule)) << "the rule fails without the plant";
  o.out = o.out / "planted";
  const ExperimentsResult planted = run_experiments(o, {c.experiment}, {}, c.plants);
  ASSERT_TRUE(verdicts(planted).count(c.rule)) << c.rule;
  EXPECT_FALSE(verdicts(planted).at(c.rule)) << c.rule << " misses the plant";
}

ExperimentPlants fault(engine::Fault f) {
  ExperimentPlants p;
  p.fault = f;
  return p;
}
ExperimentPlants scaled_noise() {
  ExperimentPlants p;
  p.injection_scale = 1024.0;  // "one rounding" of noise is really a thousand
  return p;
}
ExperimentPlants truncating_quantizers() {
  ExperimentPlants p;
  p.quantize_truncate = true;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    Plants, ExperimentRulesCatch,
    ::testing::Values(
        PlantCase{"mistral-obs-tiny", "decision_boundary", "step0_logits_bitwise",
                  fault(engine::Fault::window_recompute_only)},
        PlantCase{"gemma2-tiny", "residual_patching", "all_layers_patch_reproduces_step",
                  fault(engine::Fault::final_softcap_missing_decode)},
        PlantCase{"llama2-tiny", "kv_patching", "kv_patch_all_within_step_error",
                  fault(engine::Fault::rope_decode_off_by_one)},
        PlantCase{"llama2-tiny", "kv_buildup", "layer0_v_within_gemm_bounds", fault(engine::Fault::shifted_cache_row)},
        PlantCase{"llama2-tiny", "kv_injection", "quantizer_within_step", truncating_quantizers()},
        PlantCase{"llama2-tiny", "kv_injection", "u_noise_perturbation_rounding_sized", scaled_noise()}),
    [](const ::testing::TestParamInfo<PlantCase>& i) {
      return std::string(i.param.rule) + "_" + std::to_string(i.index);
    });

TEST(Experiments, ShardsPartitionTheRecordsAndResumeRedoesNothing) {
  NEED("llama2-tiny");
  const fs::path base = test::temp_dir("kvconf_exp");
  ProtocolOptions o = tiny("llama2-tiny", base / "whole", 4, 6);
  const std::vector<std::string> names = {"decision_boundary", "kv_buildup"};
  const ExperimentsResult whole = run_experiments(o, names);
  std::map<std::string, nlohmann::json> merged;
  for (std::size_t i = 0; i < 2; ++i) {
    ProtocolOptions s = o;
    s.out = base / ("shard" + std::to_string(i));
    s.shard = Shard{i, 2};
    for (const auto& r : run_experiments(s, names).records)
      EXPECT_TRUE(merged.emplace(experiment_record_key(r), timeless(r)).second) << "a record in two shards";
  }
  ASSERT_EQ(merged.size(), whole.records.size());
  for (const auto& r : whole.records) EXPECT_EQ(merged.at(experiment_record_key(r)), timeless(r));
  // --resume: nothing is redone, the records are the same.
  o.resume = true;
  const ExperimentsResult again = run_experiments(o, names);
  EXPECT_EQ(again.ran, 0u);
  EXPECT_EQ(again.resumed, whole.records.size());
  // --resume with other experiments is refused, naming the flag.
  EXPECT_NE(bad_input([&] { run_experiments(o, {"kv_injection"}); }).find("--experiment"), std::string::npos);
}

TEST(Experiments, BadInputIsNamed) {
  EXPECT_NE(bad_input([] { parse_experiments("kv_patching,bogus"); }).find("unknown experiment 'bogus'"),
            std::string::npos);
  EXPECT_NE(bad_input([] { parse_experiments("kv_patching,kv_patching"); }).find("listed twice"), std::string::npos);
  EXPECT_EQ(parse_experiments("kv_buildup,decision_boundary"),
            (std::vector<std::string>{"decision_boundary", "kv_buildup"}));
  nlohmann::json r = {{"experiment", "kv_patching"}, {"model", "m"}, {"profile", "p"}, {"strategy", "greedy"},
                      {"seed", 0},                   {"prompt_id", "ids:00"}};
  EXPECT_NE(bad_input([&] { summarize_experiments({r}); }).find("field 'data'"), std::string::npos);
  r["data"] = nlohmann::json::object();
  r["rules"] = nlohmann::json::array();
  EXPECT_NE(bad_input([&] { summarize_experiments({r}); }).find("kv_patching|m|p|greedy|0|ids:00"), std::string::npos);
  r["experiment"] = "nope";
  EXPECT_NE(bad_input([&] { summarize_experiments({r}); }).find("unknown experiment 'nope'"), std::string::npos);
  r.erase("model");
  EXPECT_NE(bad_input([&] { summarize_experiments({r}); }).find("key field"), std::string::npos);
}

}  // namespace
}  // namespace kvconf::protocol
