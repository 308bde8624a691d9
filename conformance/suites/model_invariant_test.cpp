// InvariantConformance: under the fp16-invariant profile (G1 + A7 + R2) cache-ON and cache-OFF give bitwise identical
// logits at every step, and chunked prefill (1, 4, 16) equals one shot — on every fixture.
// Names: Cpu/InvariantConformance.CacheOnMatchesCacheOffBitwise/<fixture>__fp16-invariant__<strategy>...; built with
// KVCONF_SUITE_GPU: Cuda/InvariantConformance... under cuda-fp16-invariant, skipping without a device.
#include "model_suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

class InvariantConformance : public ModelSuiteTest {};

TEST_P(InvariantConformance, CacheOnMatchesCacheOffBitwise) {
  const ModelCase& c = GetParam().c;
  const ModelFixture& f = model_fixture(fixtures(), c.fixture);
  const engine::ProfileKernels k = profile_kernels(c.profile);
  ASSERT_TRUE(k.profile.cache_invariant) << c.profile << " does not claim cache invariance";
  const engine::Model& m = fixture_model(f, k.profile.storage);
  const auto prompts = fixture_prompts(f, c.prompts, c.max_prompt_tokens);
  ASSERT_FALSE(prompts.empty()) << "no prompt in " << f.prompts;
  for (const analysis::Prompt& p : prompts) {
    engine::Context ctx(m, k);
    const CheckResults r =
        check_invariant_model(ctx, p.ids, pair_options(c, p.id), seed_for("invariant", c.id() + "/" + p.id));
    record(r, std::vector<std::string>(r.size(), p.id));
    expect_pass(r);
  }
}

KVCONF_INSTANTIATE_SUITE_P(
    InvariantConformance,
    ::testing::ValuesIn(model_params(suite_profiles({"fp16-invariant"}, {"cuda-fp16-invariant"}))), ModelParamName());

}  // namespace
}  // namespace kvconf::conformance::suite
