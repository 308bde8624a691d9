// SmolLM2-135M-Instruct on transformers (issue 37, docs/MODELS.md "transformers on the same weights"): kvconf's fp32
// engine and transformers' fp32 eager, two independent implementations, choose the same greedy tokens on both paths of
// each, and their logits agree within the transformers cross-check's bound B = 4·S32 (hf_crosscheck_bound.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "hf_crosscheck_bound.hpp"
#include "hf_traces.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/generate.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/trace.hpp"

namespace kvconf {
namespace {

// The first prompts of smollm2-gsm8k.json (118, 78 and 109 tokens), greedy tokens per path (most of the test's time:
// kvconf's cache-OFF steps and their reordered replay, single-threaded).
constexpr int kPrompts = 3;
constexpr int kTokens = 6;

struct TokenPath {
  std::string name;                // "transformers cache_on", "kvconf cache_off", ...
  const std::vector<int>* tokens;  // (T) greedy tokens
};

// Every path's tokens against the first's (transformers cache OFF); each difference names the prompt and the step.
// True when all are equal.
bool same_tokens(const std::string& prompt_id, const std::vector<TokenPath>& paths) {
  bool same = true;
  const TokenPath& ref = paths.front();
  for (const TokenPath& p : paths) {
    const std::size_t n = std::min(p.tokens->size(), ref.tokens->size());
    std::size_t s = 0;
    while (s < n && (*p.tokens)[s] == (*ref.tokens)[s]) ++s;
    if (s == n && p.tokens->size() == ref.tokens->size()) continue;
    same = false;
    ADD_FAILURE() << prompt_id << ": " << p.name << " differs from " << ref.name << " at step " << s << ": "
                  << (s < p.tokens->size() ? std::to_string((*p.tokens)[s]) : "none") << " vs "
                  << (s < ref.tokens->size() ? std::to_string((*ref.tokens)[s]) : "none");
  }
  return same;
}

TEST(HfSmolLM2, Fp32GreedyTokensAndLogitsAgreeWithKvconf) {
  if (std::string(KVCONF_SMOLLM2_REASON) != "") GTEST_SKIP() << "SmolLM2-135M-Instruct: " << KVCONF_SMOLLM2_REASON;
  testing::HfRun run{std::filesystem::path(KVCONF_SMOLLM2_DIR).filename().string()};
  run.prompts = kPrompts;
  run.tokens = kTokens;
  run.prompt_set = KVCONF_SMOLLM2_PROMPTS;
  const std::vector<protocol::Trace> ts = testing::run_traces(run, testing::hf_traces);
  ASSERT_EQ(ts.size(), 2u * kPrompts);

  const kernels::Registry reg = kernels::cpu_registry();
  const engine::Model model = engine::load_model(KVCONF_SMOLLM2_DIR, Format::fp32);
  engine::Context kv(model, engine::resolve(engine::find_profile("fp32"), reg));
  engine::Context alt(model, conformance::reordered_fp32_kernels(reg));
  engine::GenerateOptions o;  // greedy
  o.steps = kTokens;
  o.keep_logits = true;
  for (std::size_t i = 0; i < ts.size(); i += 2) {
    const protocol::Trace& off = ts[i];  // sorted per prompt: ....off, ....on
    const protocol::Trace& on = ts[i + 1];
    SCOPED_TRACE(off.prompt_id);
    ASSERT_TRUE(!off.cache_on && on.cache_on && on.prompt_id == off.prompt_id) << off.file << ", " << on.file;
    ASSERT_EQ(off.logits_dtype, "F32");
    const engine::GenerateResult kv_on = engine::generate(kv, off.prompt_ids, engine::CacheMode::on, o);
    const engine::GenerateResult kv_off = engine::generate(kv, off.prompt_ids, engine::CacheMode::off, o);
    if (!same_tokens(off.prompt_id, {{"transformers cache_off", &off.generated_ids},
                                     {"transformers cache_on", &on.generated_ids},
                                     {"kvconf cache_on", &kv_on.tokens},
                                     {"kvconf cache_off", &kv_off.tokens}}))
      continue;  // the logits below would follow different sequences
    // The same tokens: kvconf's cache-OFF logits are those of the cross-check's replay over transformers' sequence.
    const double bound = testing::crosscheck_bound(testing::replay_off(alt, off), kv_off.logits);
    EXPECT_GT(bound, 0.0);
    for (const protocol::Trace* t : {&off, &on}) {
      const double diff = testing::max_diff(t->logits, kv_off.logits);
      EXPECT_LE(diff, bound) << off.prompt_id << " " << (t->cache_on ? "cache_on" : "cache_off")
                             << ": max |z_hf - z_kvconf fp32| = " << diff << " > B = " << bound;
      std::printf(
          "%s transformers %s: tokens = kvconf's on both paths; max |z_hf - z_kvconf fp32| = %.3g, B = %.3g "
          "(ratio %.3f)\n",
          off.prompt_id.c_str(), t->cache_on ? "cache_on" : "cache_off", diff, bound, diff / bound);
    }
  }
}

}  // namespace
}  // namespace kvconf
