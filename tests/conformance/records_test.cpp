// Unit tests of the run-pair and kernel-case records' JSON form: round trip (non-finite values included), and bad
// records rejected with the field named.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/results/records.hpp"

namespace kvconf::conformance {
namespace {

RunPairRecord sample_pair() {
  RunPairRecord r;
  r.model = "fixture:llama2-tiny";
  r.profile = "fp16-eager";
  r.strategy = "topk";
  r.prompt_id = "gsm8k:0042";
  r.seed = 3;
  r.max_new_tokens = 4;
  r.prompt_tokens = 17;
  r.free.tokens_on = {5, 6, 7, 8};
  r.free.tokens_off = {5, 6, 9, 10};
  r.free.flip = 2;
  r.free.kl = {0.0, 1e-7, 0.25, 3.5};
  r.free.js = {0.0, 2e-8, 0.06, 0.6};
  r.free.margin_on = {1.5, 0.75, 0.0, 2.0};
  r.free.margin_off = {1.5, 0.5, 0.001, 1.0};
  r.free.max_abs_logit_diff = {0.0, 0.001, 0.002, 4.0};
  r.teacher = r.free;
  r.teacher.flip.reset();
  r.layer_drift_l2 = {0.0, 0.5, 1.25};
  r.layer_cosine = {1.0, 0.9, 0.8};
  CheckResult c;
  c.rule = "flip_near_tie";
  c.pass = true;
  c.error = 0.003;
  c.bound = 0.01;
  c.headroom = 0.7;
  c.seed = 99;
  c.detail = "step 2";
  r.rules = {c};
  r.gold = "72";
  r.answer_on = "72";
  r.correct_on = true;
  r.seconds = 0.5;
  return r;
}

TEST(Records, RunPairRoundTrips) {
  const RunPairRecord r = sample_pair();
  const RunPairRecord back = run_pair_from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_EQ(back.key(), r.key());
  EXPECT_EQ(back.key(), "fixture:llama2-tiny|fp16-eager|topk|3|gsm8k:0042");
  EXPECT_EQ(back.free.tokens_off, r.free.tokens_off);
  ASSERT_TRUE(back.free.flip.has_value());
  EXPECT_EQ(*back.free.flip, 2u);
  EXPECT_FALSE(back.teacher.flip.has_value());
  EXPECT_EQ(back.free.kl, r.free.kl);  // doubles survive dump/parse exactly (nlohmann prints round-trip digits)
  EXPECT_EQ(back.layer_drift_l2, r.layer_drift_l2);
  ASSERT_EQ(back.rules.size(), 1u);
  EXPECT_EQ(back.rules[0].rule, "flip_near_tie");
  EXPECT_EQ(back.rules[0].seed, 99u);
  EXPECT_EQ(back.gold, r.gold);
  EXPECT_EQ(back.answer_on, r.answer_on);
  EXPECT_FALSE(back.answer_off.has_value());
  EXPECT_TRUE(back.correct_on);
  EXPECT_FALSE(back.correct_off);
  EXPECT_DOUBLE_EQ(back.free.mean_kl(), (0.0 + 1e-7 + 0.25 + 3.5) / 4);
  EXPECT_FALSE(back.fp32_kl_floor.has_value());
}

// The fp32 reference pairs' noise floor (Fp32KlRatio) survives; a record without the field (older files) reads as none.
TEST(Records, Fp32KlFloorRoundTripsAndIsOptional) {
  RunPairRecord r = sample_pair();
  r.fp32_kl_floor = 4.5103691e-09;
  nlohmann::json j = to_json(r);
  const RunPairRecord back = run_pair_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.fp32_kl_floor.has_value());
  EXPECT_EQ(*back.fp32_kl_floor, *r.fp32_kl_floor);
  j.erase("fp32_kl_floor");
  EXPECT_FALSE(run_pair_from_json(j).fp32_kl_floor.has_value());
}

// kvconf model's Fp32KlRatio takes fp32's KL over the steps both paths share: up to and including a flip.
TEST(Records, SharedContextMeanKlStopsAtTheFlip) {
  const std::vector<double> kl = {1.0, 3.0, 100.0, 200.0};
  EXPECT_DOUBLE_EQ(shared_context_mean_kl(kl, std::nullopt), 76.0);
  EXPECT_DOUBLE_EQ(shared_context_mean_kl(kl, std::size_t{1}), 2.0);
  EXPECT_DOUBLE_EQ(shared_context_mean_kl(kl, std::size_t{9}), 76.0);
  EXPECT_DOUBLE_EQ(shared_context_mean_kl({}, std::nullopt), 0.0);
}

TEST(Records, NonFiniteNumbersSurvive) {
  RunPairRecord r = sample_pair();
  r.rules[0].headroom = -std::numeric_limits<double>::infinity();
  r.free.kl[0] = std::numeric_limits<double>::infinity();
  r.free.js[0] = std::numeric_limits<double>::quiet_NaN();
  const auto j = to_json(r);
  EXPECT_EQ(j["rules"][0]["headroom"], "-inf");
  const RunPairRecord back = run_pair_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_TRUE(std::isinf(back.rules[0].headroom) && back.rules[0].headroom < 0);
  EXPECT_TRUE(std::isinf(back.free.kl[0]));
  EXPECT_TRUE(std::isnan(back.free.js[0]));
}

TEST(Records, KernelCaseRoundTrips) {
  KernelCaseRecord k;
  k.kernel = "cpu.attn.a1_flash2.f16";
  k.kind = "attention";
  k.case_id = "f16_acc32_n128_d256_gqa2_win0";
  k.seq_len = 128;
  k.head_dim = 256;
  k.rules = sample_pair().rules;
  OnOffDiff d;
  d.elements = 256;
  d.differing = 3;
  d.max_ulp = 1.0;
  d.max_abs = 1e-3;
  d.max_rel = 2e-4;
  d.paths = "decode vs prefill";
  k.on_off = d;
  const KernelCaseRecord back = kernel_case_from_json(nlohmann::json::parse(to_json(k).dump()));
  EXPECT_EQ(back.key(), "cpu.attn.a1_flash2.f16|f16_acc32_n128_d256_gqa2_win0");
  EXPECT_EQ(back.head_dim, 256u);
  ASSERT_TRUE(back.on_off.has_value());
  EXPECT_EQ(back.on_off->differing, 3u);
  EXPECT_EQ(back.on_off->paths, "decode vs prefill");
  k.on_off.reset();
  EXPECT_FALSE(kernel_case_from_json(to_json(k)).on_off.has_value());
}

// The error message names the field and what was expected.
void expect_error(const nlohmann::json& j, const std::string& needle) {
  try {
    (void)run_pair_from_json(j);
    ADD_FAILURE() << "accepted a bad record; expected an error mentioning " << needle;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Records, BadRecordsNameTheField) {
  const nlohmann::json good = to_json(sample_pair());
  auto j = good;
  j.erase("profile");
  expect_error(j, "'profile'");
  j = good;
  j["schema"] = "kvconf.runpair/0";
  expect_error(j, "kvconf.runpair/1");
  j = good;
  j["free"]["kl"] = "many";
  expect_error(j, "free.kl");
  j = good;
  j["free"]["js"].push_back(0.0);  // per-step arrays of different lengths
  expect_error(j, "one length");
  j = good;
  j["seed"] = -1;
  expect_error(j, "'seed'");
  j = good;
  j["teacher"]["tokens_on"][0] = 1.5;
  expect_error(j, "teacher.tokens_on");
}

}  // namespace
}  // namespace kvconf::conformance
