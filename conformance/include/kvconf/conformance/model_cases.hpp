// The model suites' cases and rules (DESIGN.md rules 3 and 4 at model level): the fixtures {llama2-tiny, mistral-tiny,
// gemma2-tiny, stories260K} × profiles × strategies, their prompts, and the checks PrefillConformance,
// FlipsAreNearTies, Fp32Conformance and InvariantConformance apply. Derivations: docs/TOLERANCES.md "Model rules".
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/analysis/paired.hpp"
#include "kvconf/analysis/prompts.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/sampling.hpp"

namespace kvconf::conformance {

struct ModelFixture {
  std::string name;               // "llama2-tiny", ..., "stories260K"
  std::filesystem::path model;    // a checkpoint folder or a llama2.c .bin
  std::filesystem::path prompts;  // a prompt-set file (analysis::read_prompts)
  // A real trained model (SmolLM2-135M-Instruct, docs/MODELS.md): far costlier than the tiny fixtures, so the suites
  // and tables that run "every fixture" leave it out unless it is named.
  bool real = false;
};

// The tiny HF-format fixtures under fixtures_dir/models (prompts: fixtures_dir/prompts/gsm8k.json), stories260K
// from shared_dir/models (prompts: fixtures_dir/prompts/stories.json, token ids), and the real smollm2-135m
// (fixtures_dir/models/smollm2-135m, converted at build time; prompts: fixtures_dir/prompts/smollm2-gsm8k.json,
// GSM8K as chat turns).
std::vector<ModelFixture> model_fixtures(const std::filesystem::path& fixtures_dir,
                                         const std::filesystem::path& shared_dir);
const ModelFixture& model_fixture(const std::vector<ModelFixture>& all, const std::string& name);
// Why this fixture cannot run here (a missing file), or nullopt.
std::optional<std::string> fixture_missing(const ModelFixture& f);

// The fixture's model in `storage`, loaded once per process through engine::load_model (the real loaders).
const engine::Model& fixture_model(const ModelFixture& f, Format storage);
// The first `count` prompts of at most `max_tokens` tokens, in file order.
std::vector<analysis::Prompt> fixture_prompts(const ModelFixture& f, std::size_t count, std::size_t max_tokens);

struct ModelCase {
  std::string fixture;
  std::string profile;
  engine::Strategy strategy = engine::Strategy::greedy;
  std::size_t prompts = 2;
  std::size_t steps = 12;
  std::size_t max_prompt_tokens = 96;
  bool slow = false;
  std::string id() const;  // "gemma2-tiny__fp16-eager__greedy_p2_s12"
};

// Cases over the given fixtures and profiles: the default set (greedy, few prompts and steps) and, when slow, the
// sweep (every strategy, more prompts and steps).
std::vector<ModelCase> model_cases(const std::vector<std::string>& fixtures, const std::vector<std::string>& profiles,
                                   bool slow);

engine::Sampler case_sampler(const ModelCase& c, const std::string& prompt_id);  // seed from the case and prompt

// ---- the rules --------------------------------------------------------------------------------------------------

// PrefillConformance: the prompt's last-row logits and every layer's hidden states (all rows) from the cache-ON
// prefill (into a cache with room for the generation) equal the cache-OFF recompute's bit for bit.
CheckResults check_prefill_bitwise(engine::Context& ctx, const std::vector<int>& prompt, std::uint64_t seed);

// FlipsAreNearTies on one prompt (docs/TOLERANCES.md "Model rules: near-tie flips"). Runs the pair free-running; at
// the first step t whose tokens differ (a = cache-ON's, b = cache-OFF's), evaluates the fp32 reference z_ref (the
// same stored weights in fp32, cache-OFF) at steps 0..t and checks
//   flip_consistency:  greedy: m = z_off[b] − z_off[a] <= |Δ_a| + |Δ_b|  (Δ = z_on − z_off at step t);
//   flip_near_tie:     |Δ_a| + |Δ_b| <= 4·S_t,  S_t = max_{s<=t} ‖z_off,s − z_ref,s‖∞ (cache-OFF's own rounding error).
// No flip: one passing "no_flip" result. `ref` is the fp32 context over the fp32 copy of the model.
CheckResults check_flips_are_near_ties(engine::Context& ctx, engine::Context& ref, const std::vector<int>& prompt,
                                       const analysis::PairOptions& o, std::uint64_t seed,
                                       analysis::PairedRun* run_out = nullptr);

// The rules of check_flips_are_near_ties on a free-running run already made (`run` kept its logits; `prompt` is its
// prompt), e.g. one read from two engine traces (kvconf check). `z_ref` evaluates the fp32 reference (cache OFF) on a
// token sequence; without it (a trace checked without its checkpoint) S is unknown, so only no_flip /
// flip_consistency are evaluated. With it, flip_near_tie's detail also says which path is closer to fp32 at the flip.
using ReferenceLogits = std::function<std::vector<float>(const std::vector<int>&)>;
CheckResults flip_rules(const analysis::PairedRun& run, const std::vector<int>& prompt, engine::Strategy strategy,
                        const ReferenceLogits& z_ref, std::uint64_t seed);

// Fp32Conformance's KL rule (seed paper §6.3, "more than 8 orders of magnitude" lower KL under fp32): mean
// KL(fp32 cache-ON‖cache-OFF) <= kFp32KlRatio × mean KL(fp16) over the prompts where fp16 diverges, or, where
// fp16's own KL is too small for a ratio to mean anything (a model whose divergent continuations stay close in
// distribution, stories260K), <= the fp32 noise floor (fp32_kl_floor). Defined here once for the suite
// (conformance/suites/model_fp32_test.cpp) and the reports' rule (reports/src/rules.cpp). docs/MODELS.md "Fp32KlRatio".
inline constexpr double kFp32KlRatio = 1e-8;

// The mean per-step KL of a free-running pair over the steps whose context both paths share: every step, or, when the
// pair flipped at step t, steps 0..t (after t the paths condition on different text). Fp32KlRatio takes fp32's KL this
// way: an fp32 flip under top-k/top-p is a legitimate near-tie at the cut-off (recorded, not gated), and the KL after
// it measures the different contexts, not fp32 rounding (the paper's fp32 runs never flip).
double shared_context_mean_kl(const std::vector<double>& kl, const std::optional<std::size_t>& flip);

// kvconf's fp32 profile with every reduction in another order (sequential GEMM g1 for blocked g3, FA2-order
// attention A1 for eager A6, norm r2 for r1): the same arithmetic summed differently. S32 = ‖z_fp32 − z_reordered‖∞ on
// one token sequence is how far fp32 rounding alone moves the logits: the yardstick of the transformers cross-check
// (tests/adapters) and of the fp32 noise floor. `cpu` must outlive the kernels.
engine::ProfileKernels reordered_fp32_kernels(const kernels::Registry& cpu);

// The fp32 noise floor of a free-running fp32 pair's mean KL: with Δ_s = z_on,s − z_off,s and Hoeffding's lemma,
// KL(p_on‖p_off) <= (max Δ − min Δ)²/8 <= ‖Δ_s‖∞²/2; an fp32 cache-ON/OFF difference is a reordering of the same
// fp32 arithmetic, so ‖Δ_s‖∞ <= 4·S32_s (the 4·S of FlipsAreNearTies). Floor = mean over steps of (4·S32_s)²/2 =
// 8·S32_s² with S32_s measured on the pair's cache-OFF sequence (`logits_off`, `tokens_off`: run kept its logits)
// against `reordered` (a context of reordered_fp32_kernels over the same fp32 model).
double fp32_kl_floor(const analysis::PairedRun& run, engine::Context& reordered);

// InvariantConformance: every step's logits bitwise equal between the paths (free-running), and chunked prefill
// (chunks 1, 4, 16) equal to one shot.
CheckResults check_invariant_model(engine::Context& ctx, const std::vector<int>& prompt, const analysis::PairOptions& o,
                                   std::uint64_t seed);

// CacheStoreConformance.GrowthKeepsHeldRows: a context whose cache starts at 2 rows and grows (doubling) while it
// holds rows, against one allocated for the whole run: 2 prompt tokens prefilled, the rest of the prompt and `steps`
// greedy tokens (the fixed one's) decoded; after every call the logits and every held K/V row bitwise equal
// (cache_growth_bitwise), and at least two growths after the first call (cache_growth_exercised).
CheckResults check_cache_growth(const engine::Model& m, const engine::ProfileKernels& k, const std::vector<int>& prompt,
                                std::size_t steps, std::uint64_t seed);

// CacheStoreConformance.StoreIsExact: greedy decode of `steps` tokens; every K/V element each step wrote into the
// cache, in every layer, is bit for bit the K (after RoPE) or V the forward computed for that row (cache_store_exact).
// A store with a rounding of its own (toward zero, say: half an ulp of bias per element on average, far inside any
// per-element bound and invisible to a single comparison of outputs) fails it. Also measured (counts, not gated): the
// layer-0 decode rows against the cache-OFF recompute's, where both paths project the same inputs.
struct CacheStoreCounts {
  std::size_t stored = 0, altered = 0, stored_smaller_magnitude = 0;                  // the store vs what was computed
  std::size_t compared = 0, differing = 0, on_greater = 0, on_smaller_magnitude = 0;  // layer 0, ON vs OFF
};
CheckResults check_cache_store(engine::Context& ctx, const std::vector<int>& prompt, std::size_t steps,
                               std::uint64_t seed, CacheStoreCounts* counts = nullptr);

}  // namespace kvconf::conformance
