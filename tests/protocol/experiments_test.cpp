// kvconf model --experiment as a library (kvconf/protocol/experiments.hpp) on the tiny fixtures: every experiment's
// rules pass on clean runs and each rule fails under the planted fault it is meant to catch; shards partition the
// records and --resume redoes nothing; bad names and bad records are BadInput; the report carries the experiments.
#include "kvconf/protocol/experiments.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bad_input_message.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/rounding.hpp"
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
  const ExperimentsResult r = run_experiments(tiny("llama2-tiny", out, 2, 10), {"all"});
  ASSERT_EQ(r.summaries.size(), experiment_names().size());
  EXPECT_EQ(r.records.size(), 2u * experiment_names().size());
  for (const auto& s : r.summaries) {
    EXPECT_FALSE(s.verdicts.empty()) << s.name << " has no gating rule";
    EXPECT_FALSE(s.rows.empty()) << s.name;
    EXPECT_FALSE(s.plots.empty()) << s.name;
    EXPECT_GT(s.seconds, 0.0) << s.name;
    for (const auto& v : s.verdicts)
      EXPECT_TRUE(v.result.pass) << v.suite << " " << v.result.rule << ": " << v.result.detail;
  }
  const std::map<std::string, bool> v = verdicts(r);
  for (const char* rule :
       {"step0_logits_bitwise", "all_layers_patch_reproduces_step", "kv_patch_all_within_step_error",
        "layer0_v_within_gemm_bounds", "quantizer_within_step", "u_noise_perturbation_rounding_sized",
        "cache_invariant_mitigation_bitwise", "full_patch_reproduces_off"})
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
    ::testing::Values(PlantCase{"mistral-obs-tiny", "decision_boundary", "step0_logits_bitwise",
                                fault(engine::Fault::window_recompute_only)},
                      PlantCase{"gemma2-tiny", "residual_patching", "all_layers_patch_reproduces_step",
                                fault(engine::Fault::final_softcap_missing_decode)},
                      PlantCase{"llama2-tiny", "kv_patching", "kv_patch_all_within_step_error",
                                fault(engine::Fault::rope_decode_off_by_one)},
                      PlantCase{"llama2-tiny", "kv_buildup", "layer0_v_within_gemm_bounds",
                                fault(engine::Fault::shifted_cache_row)},
                      PlantCase{"llama2-tiny", "mitigations", "cache_invariant_mitigation_bitwise",
                                fault(engine::Fault::rope_decode_off_by_one)},
                      PlantCase{"gemma2-tiny", "flip_attribution", "full_patch_reproduces_off",
                                fault(engine::Fault::final_softcap_missing_decode)},
                      PlantCase{"llama2-tiny", "kv_injection", "quantizer_within_step", truncating_quantizers()},
                      PlantCase{"llama2-tiny", "kv_injection", "u_noise_perturbation_rounding_sized", scaled_noise()},
                      PlantCase{"mistral-tiny", "gqa_amplification", "gqa_perturbation_rounding_sized",
                                fault(engine::Fault::gqa_modulo_decode)}),
    [](const ::testing::TestParamInfo<PlantCase>& i) {
      return std::string(i.param.rule) + "_" + std::to_string(i.index);
    });

}  // namespace
// Defined in protocol/src/experiments/gqa_amplification.cpp (internal to the library; declared here for the test
// below).
namespace experiments {
engine::Model gqa_variant(const engine::Model& base, std::size_t n_kv);
std::vector<std::size_t> gqa_sharing_ratios(std::size_t H, std::size_t B);
}  // namespace experiments
namespace {

// The sharing ratios each model gets: the tiny fixtures' (H = 2, 4, 8: powers of two) as before, and a model whose
// heads are not a power of two gets its own ratio and full sharing (SmolLM2: 9 query heads over 3 K/V heads).
TEST(ExperimentGqa, SharingRatiosIncludeTheModelsOwn) {
  using V = std::vector<std::size_t>;
  EXPECT_EQ(experiments::gqa_sharing_ratios(8, 2), (V{1, 2, 4, 8}));  // mistral-tiny
  EXPECT_EQ(experiments::gqa_sharing_ratios(2, 2), (V{1, 2}));        // llama2-tiny (MHA)
  EXPECT_EQ(experiments::gqa_sharing_ratios(4, 2), (V{1, 2, 4}));     // gemma2-tiny
  EXPECT_EQ(experiments::gqa_sharing_ratios(9, 3), (V{1, 3, 9}));     // SmolLM2-135M: G = 3 is the model itself
  EXPECT_EQ(experiments::gqa_sharing_ratios(12, 4), (V{1, 3, 12}));   // 2, 4: 6 and 3 K/V heads, not over 4
  EXPECT_EQ(experiments::gqa_sharing_ratios(32, 8), (V{1, 2, 4, 8, 32}));
}

// gqa_amplification's variants, checked independently of the experiment: the replicated MHA variant of mistral-tiny
// (8 query heads, 2 K/V heads each copied 4 times) computes the same function in the same arithmetic, so one prefill's
// logits (vocab) and one decode's equal the base model's bit for bit; a pooled variant has n_heads / G K/V heads, each
// the storage-rounded mean of its group of base heads.
TEST(Experiments, GqaVariantsReplicateExactlyAndPoolByTheMean) {
  NEED("mistral-tiny");
  const engine::Model base =
      engine::load_model(fs::path(KVCONF_FIXTURES_DIR) / "models" / "mistral-tiny", Format::fp16);
  ASSERT_EQ(base.config.n_heads, 8u);
  ASSERT_EQ(base.config.n_kv_heads, 2u);
  const std::size_t d = base.config.head_dim, D = base.config.hidden, head = d * D;  // one K/V head of wk: (d, D)
  const kernels::Registry reg = kernels::cpu_registry();
  const engine::ProfileKernels pk = engine::resolve(engine::find_profile("fp16-eager"), reg);
  const std::vector<int> prompt = {1, 415, 2936, 9060, 285, 1142, 10575, 754, 28705, 13};

  const engine::Model mha = experiments::gqa_variant(base, 8);  // G = 1
  EXPECT_EQ(mha.config.n_kv_heads, 8u);
  ASSERT_EQ(mha.layers[0].wk.size(), 8 * head);  // (8·d, D)
  EXPECT_NE(mha.layers[0].wk, base.layers[0].wk);
  engine::Context a(base, pk), b(mha, pk);
  const std::vector<float> za = a.prefill(prompt), zb = b.prefill(prompt);  // (vocab)
  ASSERT_EQ(za.size(), zb.size());
  EXPECT_EQ(std::memcmp(za.data(), zb.data(), za.size() * sizeof(float)), 0) << "prefill logits differ";
  const std::vector<float> da = a.decode(29871), db = b.decode(29871);  // (vocab)
  EXPECT_EQ(std::memcmp(da.data(), db.data(), da.size() * sizeof(float)), 0) << "decode logits differ";

  for (std::size_t G : {4u, 8u}) {
    const engine::Model v = experiments::gqa_variant(base, base.config.n_heads / G);
    EXPECT_EQ(v.config.n_kv_heads, base.config.n_heads / G) << "G=" << G;
    if (G == 4) {
      EXPECT_EQ(v.layers[1].wv, base.layers[1].wv) << "G=4 is the base model";
    }
  }
  const engine::Model mqa = experiments::gqa_variant(base, 1);  // G = 8: the two base heads averaged
  ASSERT_EQ(mqa.layers[1].wv.size(), head);                     // (d, D)
  for (std::size_t i : {std::size_t{0}, head / 3, head - 1}) {
    const double m = (double(base.layers[1].wv[i]) + base.layers[1].wv[head + i]) / 2.0;
    EXPECT_EQ(mqa.layers[1].wv[i], static_cast<float>(round_to(Format::fp16, m))) << "element " << i;
  }
  engine::Context c(mqa, pk);
  EXPECT_NE(c.prefill(prompt), za) << "the pooled model is another function";
  EXPECT_THROW(experiments::gqa_variant(base, 3), std::invalid_argument);
}

// The high-precision cache remedy (ContextOptions::kv_fp32_gemm): the cached V rows are fp32 results of the fp32 GEMM
// kernel, so most are not fp16 values; layer 0's, rounded to fp16, are within one rounding of the plain context's (the
// same inputs through another accumulation order); the logits move.
TEST(Experiments, Fp32KvCacheKeepsTheProjectionsUnrounded) {
  NEED("llama2-tiny");
  const engine::Model m = engine::load_model(fs::path(KVCONF_FIXTURES_DIR) / "models" / "llama2-tiny", Format::fp16);
  const kernels::Registry reg = kernels::cpu_registry();
  const engine::ProfileKernels pk = engine::resolve(engine::find_profile("fp16-eager"), reg);
  const engine::ProfileKernels k32 = engine::resolve(engine::find_profile("fp32"), reg);
  engine::ContextOptions o32;
  o32.kv_fp32_gemm = k32.gemm;
  engine::Context plain(m, pk), wide(m, pk, o32);
  const std::vector<int> prompt = {1, 415, 2936, 9060, 285, 1142};
  const std::vector<float> z16 = plain.prefill(prompt), z32 = wide.prefill(prompt);  // (vocab)
  EXPECT_NE(z16, z32) << "fp32 K/V changed nothing";
  const std::size_t kvd = m.config.kv_dim();
  std::size_t not_fp16 = 0;
  for (std::size_t i = 0; i < prompt.size() * kvd; ++i) {
    const float v32 = wide.cache().v[0][i];
    not_fp16 += static_cast<float>(round_to(Format::fp16, v32)) != v32;
    // Layer 0's input is the same normed embedding in both contexts: the fp16 projection is the fp32 one up to the
    // accumulation order (far below one fp16 rounding here) and its own rounding to fp16.
    const double v16 = plain.cache().v[0][i];
    EXPECT_LE(std::fabs(v32 - v16), 2.0 * std::ldexp(std::fabs(v16) + 0x1p-14, -11)) << "element " << i;
  }
  EXPECT_GT(not_fp16, prompt.size() * kvd / 2) << "the cached V rows are (mostly) fp16 values: not kept in fp32";
}

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
  nlohmann::json r = {{"experiment", "kv_patching"}, {"model", "m"}, {"profile", "p"},
                      {"strategy", "greedy"},        {"seed", 0},    {"prompt_id", "ids:00"}};
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
