// CacheStoreConformance: the KV cache itself under every profile, on every fixture (greedy decoding).
//   GrowthKeepsHeldRows: a cache that starts with 2 rows and grows (by doubling) while it holds rows gives the same
//     logits and the same K/V rows, bit for bit, as one allocated for the whole run at the start: growth moves rows,
//     it never changes them, and no kernel's result depends on how many rows are allocated.
//   StoreIsExact: every K/V element decode writes into the cache is bit for bit what the forward computed for that
//     row (K after RoPE, V): the store adds no rounding of its own. A store that rounds one way (toward zero, say:
//     half an ulp of bias per element on average, invisible to any one-element bound) changes some of them.
// Names: Cpu/CacheStoreConformance.<Claim>/<fixture>__<profile>__greedy_...; built with KVCONF_SUITE_GPU, the GPU
// profiles (skipping without a device).
#include "model_suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

class CacheStoreConformance : public ModelSuiteTest {};

TEST_P(CacheStoreConformance, GrowthKeepsHeldRows) {
  const ModelCase& c = GetParam().c;
  const ModelFixture& f = model_fixture(fixtures(), c.fixture);
  const engine::ProfileKernels k = profile_kernels(c.profile);
  const engine::Model& m = fixture_model(f, k.profile.storage);
  const auto prompts = fixture_prompts(f, 1, c.max_prompt_tokens);
  ASSERT_FALSE(prompts.empty()) << "no prompt in " << f.prompts;
  const CheckResults r = check_cache_growth(m, k, prompts[0].ids, c.steps, seed_for("cache_growth", c.id()));
  record(r);
  expect_pass(r);
}

TEST_P(CacheStoreConformance, StoreIsExact) {
  const ModelCase& c = GetParam().c;
  const ModelFixture& f = model_fixture(fixtures(), c.fixture);
  const engine::ProfileKernels k = profile_kernels(c.profile);
  const engine::Model& m = fixture_model(f, k.profile.storage);
  const auto prompts = fixture_prompts(f, c.prompts, c.max_prompt_tokens);
  ASSERT_FALSE(prompts.empty()) << "no prompt in " << f.prompts;
  for (const analysis::Prompt& p : prompts) {
    engine::Context ctx(m, k);
    const CheckResults r = check_cache_store(ctx, p.ids, c.steps, seed_for("cache_store", c.id() + "/" + p.id));
    record(r, std::vector<std::string>(r.size(), p.id));
    expect_pass(r);
  }
}

std::vector<ModelParam> params() {
  std::vector<ModelParam> v;
  for (const ModelParam& p : model_params(all_suite_profiles(), /*with_slow=*/false))
    if (p.c.strategy == engine::Strategy::greedy) v.push_back(p);
  return v;
}

KVCONF_INSTANTIATE_SUITE_P(CacheStoreConformance, ::testing::ValuesIn(params()), ModelParamName());

}  // namespace
}  // namespace kvconf::conformance::suite
