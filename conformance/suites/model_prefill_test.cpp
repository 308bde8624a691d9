// PrefillConformance (seed paper §5.2: prefill gives identical states in both paths): for every fixture and profile,
// the prompt's logits and every layer's hidden states from the cache-ON prefill equal the cache-OFF recompute's bit
// for bit. Names: Cpu/PrefillConformance.PromptStatesBitwiseEqual/<fixture>__<profile>__... (every CPU profile);
// built with KVCONF_SUITE_GPU: Cuda/PrefillConformance... over the GPU profiles (cuda-fp16, cuda-fp32,
// cuda-fp16-invariant), skipping with the reason where no CUDA device can run them.
#include "model_suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

class PrefillConformance : public ModelSuiteTest {};

TEST_P(PrefillConformance, PromptStatesBitwiseEqual) {
  const ModelCase& c = GetParam().c;
  const ModelFixture& f = model_fixture(fixtures(), c.fixture);
  const engine::ProfileKernels k = profile_kernels(c.profile);
  const engine::Model& m = fixture_model(f, k.profile.storage);
  const auto prompts = fixture_prompts(f, c.prompts, c.max_prompt_tokens);
  ASSERT_FALSE(prompts.empty()) << "no prompt of at most " << c.max_prompt_tokens << " tokens in " << f.prompts;
  for (const analysis::Prompt& p : prompts) {
    engine::Context ctx(m, k, engine::ContextOptions{p.ids.size() + c.steps});
    const CheckResults r = check_prefill_bitwise(ctx, p.ids, seed_for("prefill", c.id() + "/" + p.id));
    record(r, {p.id, p.id});
    expect_pass(r);
  }
}

KVCONF_INSTANTIATE_SUITE_P(PrefillConformance,
                           ::testing::ValuesIn(model_params(all_suite_profiles(), /*with_slow=*/false)),
                           ModelParamName());

}  // namespace
}  // namespace kvconf::conformance::suite
