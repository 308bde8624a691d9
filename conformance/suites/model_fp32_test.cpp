// Fp32Conformance (seed paper §6.3, the falsification run): under the fp32 profile — the same shape-dependent kernels
// as fp16-eager, in fp32 — greedy cache-ON and cache-OFF give identical token sequences on every prompt, and the mean
// KL(p_on‖p_off) is at most 1e-8 × fp16-eager's on the same prompts when fp16 diverges on at least one of them, or
// at most the fp32 noise floor (conformance::fp32_kl_floor) where fp16's KL is too small for that ratio to hold.
// Names: Cpu/Fp32Conformance.TokensIdenticalAndKlNegligible/<fixture>__fp32__<strategy>...; built with
// KVCONF_SUITE_GPU: Cuda/Fp32Conformance.../<fixture>__cuda-fp32__... (cuda-fp32 against cuda-fp16), skipping
// without a device.
#include "model_suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

class Fp32Conformance : public ::testing::TestWithParam<ModelParam> {};

// The fp16 profile an fp32 profile is compared with: the same kernels in fp16 (the reports' choice too).
std::string partner(const std::string& fp32_profile) { return fp16_partner(fp32_profile, {"fp16-eager", "cuda-fp16"}); }

TEST_P(Fp32Conformance, TokensIdenticalAndKlNegligible) {
  const ModelCase& c = GetParam().c;
  KVCONF_SKIP_IF_UNAVAILABLE(c.profile);
  KVCONF_SKIP_IF_UNAVAILABLE(partner(c.profile));
  const ModelFixture& f = model_fixture(fixtures(), c.fixture);
  KVCONF_SKIP_IF_MISSING(f);
  const engine::ProfileKernels k32 = profile_kernels(c.profile);
  const engine::ProfileKernels k16 = profile_kernels(partner(c.profile));
  const engine::Model& m32 = fixture_model(f, Format::fp32);
  const engine::Model& m16 = fixture_model(f, Format::fp16);
  const auto prompts = fixture_prompts(f, c.prompts, c.max_prompt_tokens);
  ASSERT_FALSE(prompts.empty()) << "no prompt in " << f.prompts;
  static const kernels::Registry cpu = kernels::cpu_registry();
  const engine::ProfileKernels reordered = reordered_fp32_kernels(cpu);
  // One record per prompt and profile, as the protocol writes them; the verdicts are the reports' (model_rules.hpp).
  std::vector<RunPairRecord> rec32, rec16;
  std::size_t diverged16 = 0;
  for (const analysis::Prompt& p : prompts) {
    analysis::PairOptions o = pair_options(c, p.id);
    engine::Context ctx32(m32, k32), ctx16(m16, k16), ctx_reordered(m32, reordered);
    o.keep_logits = true;
    const analysis::PairedRun r32 = analysis::run_free(ctx32, ctx32, p.ids, o);
    o.keep_logits = false;
    const analysis::PairedRun r16 = analysis::run_free(ctx16, ctx16, p.ids, o);
    // Under top-k/top-p a near-tie at the k-th token or at the p cut-off changes the kept set by one token, so an
    // fp32 flip can be legitimate: recorded, not gated (Fp32TokensIdentical gates greedy pairs only).
    RecordProperty(p.id + ".fp32_flip_index", r32.flip ? static_cast<int>(*r32.flip) : -1);
    if (c.strategy != engine::Strategy::greedy && r32.flip)
      std::printf("%s: fp32 flip at step %zu under %s (recorded, not gated)\n", p.id.c_str(), *r32.flip,
                  o.sampler.name().c_str());
    RecordProperty(p.id + ".fp32_mean_kl", num17(r32.mean_kl()));
    RecordProperty(p.id + ".fp16_mean_kl", num17(r16.mean_kl()));
    rec32.push_back(pair_record(c, c.profile, p.id, o.sampler.seed, r32));
    rec16.push_back(pair_record(c, partner(c.profile), p.id, o.sampler.seed, r16));
    // The claim is about the runs where fp16 diverges: only there is the noise floor needed.
    if (r16.diverged()) {
      rec32.back().fp32_kl_floor = fp32_kl_floor(r32, ctx_reordered);
      ++diverged16;
    }
  }
  RecordProperty("fp16_divergence_rate", num17(static_cast<double>(diverged16) / static_cast<double>(prompts.size())));
  const std::vector<const RunPairRecord*> p32 = record_ptrs(rec32), p16 = record_ptrs(rec16);
  const std::string suite = model_rule_suite("fixture:" + c.fixture, c.profile);
  const RuleVerdict tokens = fp32_tokens_identical(suite, p32);
  record_verdict(tokens);
  EXPECT_TRUE(tokens.pass) << tokens.detail;
  // Before any flip the per-step KL ratio is ~(u32/u16)² or more (fp16 logit differences are quantized to fp16
  // ulps, many are 0), above the paper's 1e-8: its claim is about runs where fp16 diverges (docs/TOLERANCES.md
  // "Model rules"). Without an fp16 divergence among the prompts, only the token identity above is checked.
  const RuleVerdict kl = fp32_kl_ratio(suite, partner(c.profile), p32, p16);
  RecordProperty("fp32_kl_ratio.applicable", kl.skipped.empty() ? "true" : "false");
  record_verdict(kl);
  EXPECT_TRUE(kl.pass) << kl.detail;
}

KVCONF_INSTANTIATE_SUITE_P(Fp32Conformance, ::testing::ValuesIn(model_params(suite_profiles({"fp32"}, {"cuda-fp32"}))),
                           ModelParamName());

}  // namespace
}  // namespace kvconf::conformance::suite
