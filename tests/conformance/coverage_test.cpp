// The coverage of the attention case sets (conformance/coverage.hpp): every set a user can pick (quick, the pytest
// plugin's default; default; full) exercises every property the full table does, and each property follows the
// case's fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "kvconf/conformance/coverage.hpp"
#include "kvconf/conformance/sweep.hpp"

namespace kvconf::conformance {
namespace {

std::vector<AttentionCase> fast(std::vector<AttentionCase> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](const AttentionCase& c) { return c.slow; }), v.end());
  return v;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

bool has(const AttentionCase& c, const std::string& property) {
  const auto p = attention_properties(c);
  return std::find(p.begin(), p.end(), property) != p.end();
}

// A case as the tables write it: n_q rows ending at n_kv, scale fl32(1/√d).
AttentionCase make(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t heads, std::size_t kv_heads,
                   Data data = Data::normal) {
  AttentionCase c;
  c.call.shape = {n_q, n_kv, heads, kv_heads, d, d};
  c.call.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  c.call.params.scale = static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
  c.data = data;
  return c;
}

TEST(Coverage, EverySetCoversEveryPropertyOfTheFullTable) {
  const auto full = attention_cases();
  ASSERT_GE(attention_properties(full.front()).size(), 1u);
  const std::pair<const char*, std::vector<AttentionCase>> sets[] = {
      {"quick", quick_attention_cases()}, {"default", fast(full)}, {"full", full}};
  for (const auto& [name, set] : sets)
    EXPECT_EQ(joined(uncovered_properties(set, full)), "")
        << "the " << name << " attention set exercises none of these properties of the full table";
}

TEST(Coverage, TheFullTableExercisesWhatTheQuickSetIsChosenFor) {
  std::set<std::string> all;
  for (const auto& c : attention_cases())
    for (const auto& p : attention_properties(c)) all.insert(p);
  for (const char* p : {"heads.gqa", "heads.mha", "heads.mqa", "mask.window", "mask.window_noncausal", "softcap",
                        "softcap.binds", "scores.large", "scores.near_exp_overflow", "scores.p_flush", "capacity.spare",
                        "rows.chunks_of_4", "keys.one", "keys.long", "inputs.one_sign", "inputs.wide_range"})
    EXPECT_TRUE(all.count(p)) << p;
}

// The oracle's cost is about n_q·heads·n_kv·d per rule: the quick set stays within 10 % of the sweep's quick shapes'.
TEST(Coverage, TheQuickSetCostsAboutTheSweepsQuickShapes) {
  auto cost = [](const std::vector<AttentionCase>& v) {
    double s = 0;
    for (const auto& c : v)
      s += static_cast<double>(c.call.shape.n_q * c.call.shape.n_heads * c.call.shape.n_kv * c.call.shape.d);
    return s;
  };
  EXPECT_LE(cost(quick_attention_cases()), 1.1 * cost(sweep_attention_cases(true)));
  std::set<std::string> ids;
  for (const auto& c : quick_attention_cases()) EXPECT_TRUE(ids.insert(c.id()).second) << c.id() << " twice";
}

TEST(Coverage, HeadPropertiesFollowTheKvHeadMap) {
  EXPECT_TRUE(has(make(4, 64, 64, 4, 2), "heads.gqa"));   // 2 KV heads × 2 query heads each
  EXPECT_FALSE(has(make(4, 64, 64, 4, 1), "heads.gqa"));  // MQA: every map is right
  EXPECT_TRUE(has(make(4, 64, 64, 4, 1), "heads.mqa"));
  EXPECT_FALSE(has(make(4, 64, 64, 4, 4), "heads.gqa"));  // MHA: h % H_kv = h / 1
  EXPECT_TRUE(has(make(4, 64, 64, 4, 4), "heads.mha"));
  EXPECT_TRUE(has(make(4, 64, 96, 4, 4), "head_dim.96"));
}

TEST(Coverage, MaskCapacityAndChunkPropertiesFollowTheCall) {
  AttentionCase c = make(8, 200, 64, 4, 2);
  EXPECT_TRUE(has(c, "rows.chunks_of_4") && has(c, "keys.partial_tile"));
  EXPECT_FALSE(has(make(4, 128, 64, 4, 2), "rows.chunks_of_4") || has(make(4, 128, 64, 4, 2), "keys.partial_tile"));
  c.call.params.window = 200;  // as wide as the cache: binds nowhere
  EXPECT_FALSE(has(c, "mask.window"));
  c.call.params.window = 199;
  EXPECT_TRUE(has(c, "mask.window") && !has(c, "mask.window_noncausal"));
  c.call.params.causal = false;
  EXPECT_TRUE(has(c, "mask.window_noncausal") && has(c, "mask.noncausal"));
  EXPECT_FALSE(has(c, "capacity.spare"));
  c.call.capacity = 200;
  EXPECT_FALSE(has(c, "capacity.spare"));
  c.call.capacity = 201;
  EXPECT_TRUE(has(c, "capacity.spare"));
  EXPECT_TRUE(has(make(1, 1, 64, 4, 2), "keys.one") && has(make(1, 1, 64, 4, 2), "rows.one"));
}

TEST(Coverage, ScorePropertiesFollowTheData) {
  const AttentionCase normal = make(16, 512, 128, 8, 2);
  EXPECT_FALSE(has(normal, "scores.large") || has(normal, "scores.near_exp_overflow") || has(normal, "scores.p_flush"));
  EXPECT_NEAR(score_scale(normal).sd, 1.0, 1e-6);  // N(0,1) inputs, scale 1/√d
  const AttentionCase near = make(4, 128, 128, 4, 2, Data::near_exp_overflow);
  EXPECT_TRUE(has(near, "scores.near_exp_overflow"));
  EXPECT_FALSE(has(near, "scores.large") || has(near, "scores.p_flush"));  // |s| ≲ 14; e^-gap stays above 2^-24
  const AttentionCase flush = make(4, 128, 128, 4, 2, Data::p_flush);
  EXPECT_TRUE(has(flush, "scores.p_flush") && has(flush, "scores.large"));
  EXPECT_NEAR(score_scale(flush).sd, 4.5 * 4.5, 1e-3);
  const AttentionCase same = make(4, 64, 64, 4, 2, Data::same_sign);  // s ≈ scale·d·1 = 8, spread 0.42
  EXPECT_TRUE(has(same, "scores.near_exp_overflow") && has(same, "inputs.one_sign"));
  EXPECT_FALSE(has(same, "scores.large") || has(same, "scores.p_flush"));
  EXPECT_TRUE(has(make(4, 64, 128, 4, 2, Data::wide_range), "inputs.wide_range"));
  AttentionCase capped = flush;
  capped.call.params.softcap = 50.0;
  EXPECT_TRUE(has(capped, "softcap.binds"));
  EXPECT_LE(score_scale(capped).capped_max_abs, 50.0);
  AttentionCase loose = normal;
  loose.call.params.softcap = 50.0;  // |s| ≲ 5 against a cap of 50
  EXPECT_TRUE(has(loose, "softcap") && !has(loose, "softcap.binds"));
}

}  // namespace
}  // namespace kvconf::conformance
