// The example plugin (examples/plugin) through the conformance checks: its correct kernels pass the rules on a small
// battery; its planted-bug twins (libkvconf_example_wrong.so: a GEMM that claims fp32 accumulation but accumulates
// in fp16, attention whose decode calls never read the newest cache row) are each caught by the rule that should.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "check_results.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/kernels/plugin.hpp"

namespace kvconf::conformance {
namespace {

const kernels::Registry& example() {
  static const kernels::Registry r = kernels::plugin_registry({KVCONF_KVCONF_EXAMPLE_PLUGIN});
  return r;
}
const kernels::Registry& wrong() {
  static const kernels::Registry r = kernels::plugin_registry({KVCONF_KVCONF_EXAMPLE_WRONG});
  return r;
}

// A causal prefill of n_q rows ending at key n_kv, scale fl32(1/√d).
AttentionCase attn_case(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t heads, std::size_t kv_heads,
                        std::int64_t window = 0, double softcap = 0.0) {
  AttentionCase c;
  c.call.shape = {n_q, n_kv, heads, kv_heads, d, d};
  c.call.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  c.call.params.window = window;
  c.call.params.softcap = softcap;
  c.call.params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  return c;
}

using kvconf::testing::find_rule;

TEST(PluginExample, CorrectGemmsPass) {
  for (const auto& k : example().gemm())
    for (const auto& c : {gemm_case(1, 64, 1024, Data::normal), gemm_case(8, 32, 4096, Data::same_sign),
                          gemm_case(4, 32, 2048, Data::wide_range)}) {
      const auto r = check_gemm_matches_oracle(k, c, seed_for("gemm_oracle", c.id()));
      EXPECT_TRUE(all_pass(r)) << k.info.name << " on " << c.id() << "\n" << describe(r);
    }
}

TEST(PluginExample, CorrectNormsPass) {
  for (const auto& k : example().norm())
    for (const auto& c : norm_cases()) {
      if (c.slow) continue;
      const auto r = check_norm_matches_oracle(k, c, seed_for("norm_oracle", c.id()));
      EXPECT_TRUE(all_pass(r)) << k.info.name << " on " << c.id() << "\n" << describe(r);
    }
}

TEST(PluginExample, CorrectAttentionsPass) {
  constexpr std::array<std::size_t, 2> chunks = {1, 4};
  for (const auto& k : example().attention())
    for (const auto& c :
         {attn_case(8, 40, 32, 4, 2), attn_case(8, 40, 32, 2, 1, 8), attn_case(8, 40, 64, 2, 2, 0, 4.0)}) {
      CheckResults r = check_attention_matches_oracle(k, c, 7);
      for (const auto& x : check_attention_cache_on_off(k, c, 7)) r.push_back(x);
      for (const auto& x : check_attention_chunked(k, c, chunks, 7)) r.push_back(x);
      for (const auto& x : check_attention_unused_slots(k, c, 7)) r.push_back(x);
      EXPECT_TRUE(all_pass(r)) << k.info.name << " on " << c.id() << "\n" << describe(r);
    }
}

TEST(PluginExample, Fp16AccumulationIsCaught) {
  const kernels::GemmKernel* k = wrong().find_gemm("plugin.kvconf_example_wrong.gemm.acc16.f16");
  ASSERT_NE(k, nullptr);
  const GemmCase c = gemm_case(1, 64, 4096, Data::same_sign);
  const auto r = check_gemm_matches_oracle(*k, c, seed_for("gemm_oracle", c.id()));
  if (const auto* b = find_rule(r, "oracle_bound")) {
    EXPECT_FALSE(b->pass) << describe(r);
  }
  std::printf("caught %s on %s:\n%s", k->info.name.c_str(), c.id().c_str(), describe(r).c_str());
}

TEST(PluginExample, ADroppedCacheRowIsCaught) {
  const kernels::AttentionKernel* k = wrong().find_attention("plugin.kvconf_example_wrong.attn.drop_last_row.f16");
  ASSERT_NE(k, nullptr);
  const AttentionCase c = attn_case(8, 40, 32, 4, 2);
  // Decode (q_len 1 over the cache) against the last prefill row: rule 2 catches the stale cache.
  const auto on_off = check_attention_cache_on_off(*k, c, 7);
  if (const auto* b = find_rule(on_off, "on_off_bound")) {
    EXPECT_FALSE(b->pass) << describe(on_off);
  }
  // The prefill path is right (the bug is in decode only), and the decode call alone misses the oracle.
  EXPECT_TRUE(all_pass(check_attention_matches_oracle(*k, c, 7)));
  const auto decode = check_attention_matches_oracle(*k, attn_case(1, 40, 32, 4, 2), 7);
  if (const auto* b = find_rule(decode, "oracle_bound")) {
    EXPECT_FALSE(b->pass) << describe(decode);
  }
  std::printf("caught %s on %s:\n%s", k->info.name.c_str(), c.id().c_str(), describe(on_off).c_str());
}

}  // namespace
}  // namespace kvconf::conformance
