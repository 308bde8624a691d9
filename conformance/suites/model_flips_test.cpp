// FlipsAreNearTies (DESIGN.md rule 3): in free-running generation, at the first step where cache-ON and cache-OFF
// pick different tokens, the flip must be explained by rounding-sized perturbations (docs/TOLERANCES.md "Model rules:
// near-tie flips"). Per run it also records divergence, KL in both regimes and the flip index.
// Names: Cpu/ModelConformance.FlipsAreNearTies/<fixture>__<profile>__<strategy>...; built with KVCONF_SUITE_GPU:
// Cuda/ModelConformance... under cuda-fp16 (the fp32 reference stays the CPU fp32 profile), skipping without a device.
#include "model_suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

class ModelConformance : public ModelSuiteTest {};

TEST_P(ModelConformance, FlipsAreNearTies) {
  const ModelCase& c = GetParam().c;
  const ModelFixture& f = model_fixture(fixtures(), c.fixture);
  const engine::ProfileKernels k = profile_kernels(c.profile);
  const engine::ProfileKernels k32 = profile_kernels("fp32");
  const engine::Model& m = fixture_model(f, k.profile.storage);
  const engine::Model m_ref = engine::convert(m, Format::fp32);  // the same stored weights, evaluated in fp32
  const auto prompts = fixture_prompts(f, c.prompts, c.max_prompt_tokens);
  ASSERT_FALSE(prompts.empty()) << "no prompt in " << f.prompts;
  // One record per prompt, as the protocol writes them; the verdict is the reports' (model_rules.hpp).
  std::vector<RunPairRecord> records;
  std::size_t diverged = 0;
  for (const analysis::Prompt& p : prompts) {
    engine::Context ctx(m, k);
    engine::Context ref(m_ref, k32);
    analysis::PairedRun run;
    const analysis::PairOptions o = pair_options(c, p.id);
    const CheckResults r = check_flips_are_near_ties(ctx, ref, p.ids, o, seed_for("flips", c.id() + "/" + p.id), &run);
    record(r, std::vector<std::string>(r.size(), p.id));
    RecordProperty(p.id + ".flip_index", run.flip ? static_cast<int>(*run.flip) : -1);
    RecordProperty(p.id + ".mean_kl", num17(run.mean_kl()));
    diverged += run.diverged();
    records.push_back(pair_record(c, c.profile, p.id, o.sampler.seed, run));
    records.back().rules = r;
  }
  RecordProperty("divergence_rate", num17(static_cast<double>(diverged) / static_cast<double>(prompts.size())));
  const RuleVerdict v = flips_are_near_ties(model_rule_suite("fixture:" + c.fixture, c.profile), record_ptrs(records));
  record_verdict(v);
  EXPECT_TRUE(v.pass) << v.detail;
}

KVCONF_INSTANTIATE_SUITE_P(ModelConformance,
                           ::testing::ValuesIn(model_params(suite_profiles({"fp16-eager", "fp16-flash2", "bf16-eager"},
                                                                           {"cuda-fp16"}))),
                           ModelParamName());

}  // namespace
}  // namespace kvconf::conformance::suite
