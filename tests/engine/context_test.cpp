// Context: the cache-ON and cache-OFF paths, hooks and patching, on small random models of the three architectures.
// Exact properties only: equalities that hold by construction of a correct engine (bitwise), never tolerances.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kvconf/engine/context.hpp"
#include "kvconf/engine/faults.hpp"
#include "kvconf/engine/generate.hpp"
#include "kvconf/engine/profile.hpp"
#include "random_model.hpp"

namespace kvconf::engine {
namespace {

using testing::random_model;
using testing::random_tokens;
using testing::small_config;

const kernels::Registry& registry() {
  static const kernels::Registry r = kernels::cpu_registry();
  return r;
}

struct Fixture {
  Model model;
  ProfileKernels kernels;
  Fixture(Arch a, const char* profile)
      : model(random_model(small_config(a), find_profile(profile).storage, 17 + static_cast<int>(a))),
        kernels(resolve(find_profile(profile), registry())) {}
};

class PerArch : public ::testing::TestWithParam<Arch> {};

// The invariant profile's claim at engine level: each decode step's logits equal the recompute's, bit for bit.
TEST_P(PerArch, InvariantProfileDecodeEqualsRecompute) {
  Fixture f(GetParam(), "fp16-invariant");
  Context ctx(f.model, f.kernels);
  std::vector<int> seq = random_tokens(9, f.model.config.vocab, 5);
  std::vector<float> on = ctx.prefill(seq);
  for (int step = 0; step < 6; ++step) {
    const std::vector<float> off = ctx.recompute(seq);
    ASSERT_EQ(on, off) << "step " << step << " prefix " << seq.size();
    const int next = 3 + step * 7;
    seq.push_back(next);
    on = ctx.decode(next);
  }
}

// Prefill and recompute of the same prompt are the same computation: logits and hidden states bitwise equal, for
// every profile (a profile whose kernels depend on the cache capacity would fail here).
TEST_P(PerArch, PrefillEqualsRecomputeEveryProfile) {
  for (const Profile& p : builtin_profiles()) {
    Fixture f(GetParam(), p.name.c_str());
    Context ctx(f.model, f.kernels, ContextOptions{128});
    const std::vector<int> prompt = random_tokens(11, f.model.config.vocab, 6);
    ForwardOptions o;
    o.capture_hidden = true;
    const std::vector<float> on = ctx.prefill(prompt, o);
    const Trace t_on = ctx.trace();
    const std::vector<float> off = ctx.recompute(prompt, o);
    EXPECT_EQ(on, off) << p.name;
    ASSERT_EQ(t_on.hidden.size(), f.model.config.n_layers + 1);
    EXPECT_EQ(t_on.hidden, ctx.trace().hidden) << p.name;
  }
}

// Chunked prefill (chunks of 1, 4) under the invariant profile equals one shot, and the cache grows without change.
TEST_P(PerArch, InvariantChunkedPrefillEqualsOneShot) {
  Fixture f(GetParam(), "fp16-invariant");
  const std::vector<int> prompt = random_tokens(13, f.model.config.vocab, 8);
  Context one(f.model, f.kernels);
  const std::vector<float> ref = one.prefill(prompt);
  for (std::size_t chunk : {1u, 4u}) {
    Context ctx(f.model, f.kernels, ContextOptions{2});  // capacity 2: grows several times
    std::vector<float> last;
    for (std::size_t i = 0; i < prompt.size(); i += chunk)
      last = ctx.prefill(std::span<const int>(prompt).subspan(i, std::min(chunk, prompt.size() - i)));
    EXPECT_EQ(last, ref) << "chunk " << chunk;
    EXPECT_EQ(ctx.n_cached(), prompt.size());
  }
}

// Each planted fault makes the invariant profile's decode differ from recompute (a correct engine is equal: above).
// gqa_modulo_decode needs n_kv >= 2 and a group >= 2 (Mistral and Gemma-2 here); window_recompute_only needs a window.
TEST_P(PerArch, EveryApplicableFaultBreaksInvariance) {
  Fixture f(GetParam(), "fp16-invariant");
  for (Fault fault : all_faults()) {
    const ModelConfig& c = f.model.config;
    if (fault == Fault::gqa_modulo_decode && (c.n_kv_heads < 2 || c.n_heads == c.n_kv_heads)) continue;
    if ((fault == Fault::window_recompute_only) && c.sliding_window == 0) continue;
    if (fault == Fault::softcap_missing_decode && c.attn_softcap == 0.0) continue;
    Context ctx(f.model, f.kernels, with_fault(fault));
    std::vector<int> seq = random_tokens(12, c.vocab, 9);
    ctx.prefill(seq);
    bool differs = false;
    for (int step = 0; step < 4 && !differs; ++step) {
      seq.push_back(5 + step);
      differs = ctx.decode(seq.back()) != ctx.recompute(seq);
    }
    EXPECT_TRUE(differs) << fault_name(fault);
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, PerArch, ::testing::Values(Arch::llama, Arch::mistral, Arch::gemma2),
                         [](const auto& i) { return std::string(arch_name(i.param)); });

// Activation patching: replacing the last layer's residual row with the recorded one is a no-op; with another row,
// the trace shows the patch and the logits move.
TEST(EngineHooks, ResidualPatchReplacesTheLastRow) {
  Fixture f(Arch::llama, "fp16-eager");
  Context ctx(f.model, f.kernels);
  const std::vector<int> prompt = random_tokens(7, f.model.config.vocab, 10);
  ForwardOptions cap;
  cap.capture_hidden = true;
  const std::vector<float> base = ctx.recompute(prompt, cap);
  const std::size_t L = f.model.config.n_layers, D = f.model.config.hidden;
  const std::vector<float>& h = ctx.trace().hidden[L];
  std::vector<float> row(h.end() - static_cast<std::ptrdiff_t>(D), h.end());
  ForwardOptions same = cap;
  same.patches.push_back({L - 1, row});
  EXPECT_EQ(ctx.recompute(prompt, same), base);
  std::vector<float> other(D, 0.5f);
  ForwardOptions diff = cap;
  diff.patches.push_back({L - 1, other});
  EXPECT_NE(ctx.recompute(prompt, diff), base);
  const std::vector<float>& h2 = ctx.trace().hidden[L];
  EXPECT_TRUE(std::equal(other.begin(), other.end(), h2.end() - static_cast<std::ptrdiff_t>(D)));
  ForwardOptions bad = cap;
  bad.patches.push_back({0, std::vector<float>(D + 1)});
  EXPECT_THROW(ctx.recompute(prompt, bad), std::invalid_argument);
}

// KV-cache patching copies exactly the requested rows and layers; after patching every row with the recompute's
// cache, the cache-ON cache equals it.
TEST(EngineHooks, CachePatchCopiesRows) {
  Fixture f(Arch::mistral, "fp16-flash2");
  Context ctx(f.model, f.kernels);
  std::vector<int> seq = random_tokens(6, f.model.config.vocab, 11);
  ctx.prefill(seq);
  for (int t = 0; t < 3; ++t) seq.push_back(7 + t), ctx.decode(seq.back());
  ctx.recompute(seq);
  const KvCache off = ctx.last_recompute_cache();
  ASSERT_EQ(off.n, seq.size());
  const std::size_t kvd = off.kv_dim;
  ctx.patch_cache(off, 1, 2, 4);
  const KvCache& on = ctx.cache();
  EXPECT_TRUE(std::equal(off.k[1].begin() + 2 * kvd, off.k[1].begin() + 4 * kvd, on.k[1].begin() + 2 * kvd));
  EXPECT_TRUE(std::equal(off.v[1].begin() + 2 * kvd, off.v[1].begin() + 4 * kvd, on.v[1].begin() + 2 * kvd));
  ctx.patch_cache(off, Context::npos, 0, seq.size());
  for (std::size_t l = 0; l < f.model.config.n_layers; ++l) {
    EXPECT_TRUE(std::equal(off.k[l].begin(), off.k[l].begin() + seq.size() * kvd, ctx.cache().k[l].begin()));
    EXPECT_TRUE(std::equal(off.v[l].begin(), off.v[l].begin() + seq.size() * kvd, ctx.cache().v[l].begin()));
  }
  EXPECT_THROW(ctx.patch_cache(off, 0, 0, seq.size() + 1), std::invalid_argument);
  EXPECT_THROW(ctx.patch_cache(off, 9, 0, 1), std::invalid_argument);
}

// Generation: both modes on the invariant profile give the same tokens and logits; teacher forcing with a path's own
// tokens reproduces its free run.
TEST(EngineGenerate, TeacherForcedWithOwnTokensReproducesFreeRun) {
  Fixture f(Arch::gemma2, "fp16-eager");
  Context ctx(f.model, f.kernels);
  const std::vector<int> prompt = random_tokens(8, f.model.config.vocab, 12);
  GenerateOptions o;
  o.steps = 6;
  o.keep_logits = true;
  o.sampler.strategy = Strategy::top_p;
  o.sampler.seed = 3;
  for (CacheMode m : {CacheMode::on, CacheMode::off}) {
    const GenerateResult free = generate(ctx, prompt, m, o);
    ASSERT_EQ(free.tokens.size(), 6u);
    const GenerateResult tf = teacher_forced(ctx, prompt, free.tokens, m, o);
    EXPECT_EQ(tf.tokens, free.tokens) << cache_mode_name(m);
    EXPECT_EQ(tf.logits, free.logits) << cache_mode_name(m);
  }
  Fixture g(Arch::gemma2, "fp16-invariant");
  Context inv(g.model, g.kernels);
  EXPECT_EQ(generate(inv, prompt, CacheMode::on, o).logits, generate(inv, prompt, CacheMode::off, o).logits);
}

TEST(EngineContext, RejectsBadInput) {
  Fixture f(Arch::llama, "fp32");
  Context ctx(f.model, f.kernels);
  EXPECT_THROW(ctx.decode(1), std::invalid_argument);  // nothing prefilled
  const int bad[2] = {1, static_cast<int>(f.model.config.vocab)};
  EXPECT_THROW(ctx.recompute(bad), std::invalid_argument);
  EXPECT_THROW(ctx.prefill(std::span<const int>()), std::invalid_argument);
  Fixture h(Arch::llama, "fp16-eager");
  EXPECT_THROW(Context(f.model, h.kernels), std::invalid_argument);  // fp32 weights under an fp16 profile
  EXPECT_THROW(find_profile("fp17"), std::invalid_argument);
}

}  // namespace
}  // namespace kvconf::engine
