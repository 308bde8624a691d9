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

// The paper's "> 8 orders of magnitude" (DESIGN.md paper-derived thresholds), defined once in model_cases.hpp.
constexpr double kKlRatio = kFp32KlRatio;

// The fp16 profile an fp32 profile is compared with: the same kernels in fp16.
std::string fp16_partner(const std::string& fp32_profile) { return fp32_profile == "cuda-fp32" ? "cuda-fp16" : "fp16-eager"; }

TEST_P(Fp32Conformance, TokensIdenticalAndKlNegligible) {
  const ModelCase& c = GetParam().c;
  KVCONF_SKIP_IF_UNAVAILABLE(c.profile);
  KVCONF_SKIP_IF_UNAVAILABLE(fp16_partner(c.profile));
  const ModelFixture& f = model_fixture(fixtures(), c.fixture);
  KVCONF_SKIP_IF_MISSING(f);
  const engine::ProfileKernels k32 = profile_kernels(c.profile);
  const engine::ProfileKernels k16 = profile_kernels(fp16_partner(c.profile));
  const engine::Model& m32 = fixture_model(f, Format::fp32);
  const engine::Model& m16 = fixture_model(f, Format::fp16);
  const auto prompts = fixture_prompts(f, c.prompts, c.max_prompt_tokens);
  ASSERT_FALSE(prompts.empty()) << "no prompt in " << f.prompts;
  static const kernels::Registry cpu = kernels::cpu_registry();
  const engine::ProfileKernels reordered = reordered_fp32_kernels(cpu);
  double kl32 = 0.0, kl16 = 0.0, floor32 = 0.0;
  std::size_t diverged16 = 0;
  for (const analysis::Prompt& p : prompts) {
    analysis::PairOptions o = pair_options(c, p.id);
    engine::Context ctx32(m32, k32), ctx16(m16, k16), ctx_reordered(m32, reordered);
    o.keep_logits = true;
    const analysis::PairedRun r32 = analysis::run_free(ctx32, ctx32, p.ids, o);
    o.keep_logits = false;
    const analysis::PairedRun r16 = analysis::run_free(ctx16, ctx16, p.ids, o);
    // Greedy: identical tokens (the paper's 0.0% flip rate). Under top-k/top-p a near-tie at the k-th token or at
    // the p cut-off changes the kept set by one token, so an fp32 flip can be legitimate: recorded, not gated.
    RecordProperty(p.id + ".fp32_flip_index", r32.flip ? static_cast<int>(*r32.flip) : -1);
    if (c.strategy == engine::Strategy::greedy)
      EXPECT_EQ(r32.tokens_on, r32.tokens_off) << p.id << ": fp32 cache-ON and cache-OFF tokens differ (flip at step "
                                               << (r32.flip ? static_cast<long>(*r32.flip) : -1L) << ")";
    else if (r32.flip)
      std::printf("%s: fp32 flip at step %zu under %s (recorded, not gated)\n", p.id.c_str(), *r32.flip,
                  o.sampler.name().c_str());
    RecordProperty(p.id + ".fp32_mean_kl", num17(r32.mean_kl()));
    RecordProperty(p.id + ".fp16_mean_kl", num17(r16.mean_kl()));
    if (r16.diverged()) {  // the claim is about the runs where fp16 diverges
      std::vector<double> steps_kl;
      for (const analysis::StepMetrics& st : r32.steps) steps_kl.push_back(st.kl);
      kl32 += shared_context_mean_kl(steps_kl, r32.flip);  // an fp32 flip (top-k/top-p only) ends the shared context
      kl16 += r16.mean_kl();
      floor32 += fp32_kl_floor(r32, ctx_reordered);
      ++diverged16;
    }
  }
  if (diverged16 > 0) {
    const double n = static_cast<double>(diverged16);
    kl32 /= n, kl16 /= n, floor32 /= n;
  }
  RecordProperty("fp16_divergence_rate", num17(static_cast<double>(diverged16) / static_cast<double>(prompts.size())));
  std::printf("over the prompts where fp16 diverged: fp32 mean KL %.3e, fp16-eager mean KL %.3e (%zu of %zu prompts)\n",
              kl32, kl16,
              diverged16, prompts.size());
  // Before any flip the per-step KL ratio is ~(u32/u16)² or more (fp16 logit differences are quantized to fp16
  // ulps, many are 0), above the paper's 1e-8: its claim is about runs where fp16 diverges (docs/TOLERANCES.md
  // "Model rules"). Without an fp16 divergence among the prompts, only the token identity above is checked.
  RecordProperty("fp32_kl_ratio.applicable", diverged16 > 0 ? "true" : "false");
  if (diverged16 == 0) {
    std::printf("fp32_kl_ratio not applicable: fp16-eager diverges on none of the %zu prompts\n", prompts.size());
    return;
  }
  CheckResult r;
  r.rule = "fp32_kl_ratio";
  r.error = kl32;
  const bool by_floor = floor32 > kKlRatio * kl16;
  r.bound = std::max(kKlRatio * kl16, floor32);
  r.pass = kl32 <= r.bound;
  r.headroom = r.bound > 0 ? (r.bound - r.error) / r.bound : -1.0;
  r.seed = seed_for("fp32", c.id());
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%g", kKlRatio);
  char floor_text[160];
  std::snprintf(floor_text, sizeof floor_text, "; fp32 noise floor 8·mean S32² = %.3e (%s)", floor32,
                by_floor ? "the bound: fp16's KL is too small for the ratio" : "below the ratio bound");
  r.detail = "mean KL(fp32) vs max(" + std::string(ratio) + " × mean KL(fp16-eager), fp32 noise floor) over the " +
             std::to_string(diverged16) + " of " + std::to_string(prompts.size()) + " prompts where fp16 diverged" +
             floor_text;
  record({r});
  expect_pass({r});
}

KVCONF_INSTANTIATE_SUITE_P(Fp32Conformance, ::testing::ValuesIn(model_params(suite_profiles({"fp32"}, {"cuda-fp32"}))),
                           ModelParamName());

}  // namespace
}  // namespace kvconf::conformance::suite
