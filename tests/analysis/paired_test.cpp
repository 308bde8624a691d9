// Unit tests of analysis/paired and summary: summaries of hand-built runs (rates, pooled KL, flip mean/median), and
// paired runs on a small random in-memory model checked against the engine driven directly (tokens, logits, the last
// row of every hidden state), with closed-form facts (the embedding row of a shared token has zero drift).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "kvconf/analysis/paired.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::analysis {
namespace {

// ---- summaries -------------------------------------------------------------------------------------------------

PairedRun run_with(std::vector<double> kls, std::optional<std::size_t> flip) {
  PairedRun r;
  for (std::size_t t = 0; t < kls.size(); ++t) {
    StepMetrics m;
    m.step = t;
    m.kl = kls[t];
    r.steps.push_back(m);
  }
  r.flip = flip;
  return r;
}

TEST(Summary, RatesPooledKlAndOddMedian) {
  const std::vector<PairedRun> runs = {run_with({1.0, 2.0}, 8), run_with({0.0, 0.0}, std::nullopt),
                                       run_with({3.0, 6.0}, 1), run_with({0.5, 0.5}, 3)};
  EXPECT_EQ(runs[2].mean_kl(), 4.5);
  EXPECT_TRUE(runs[0].diverged());
  EXPECT_FALSE(runs[1].diverged());
  const Summary s = summarize(runs);
  EXPECT_EQ(s.runs, 4u);
  EXPECT_EQ(s.diverged, 3u);
  EXPECT_EQ(s.divergence_rate, 0.75);
  EXPECT_EQ(s.mean_kl, 13.0 / 8.0);  // (1 + 2 + 0 + 0 + 3 + 6 + 0.5 + 0.5) / 8 steps
  EXPECT_EQ(s.flip_indices, (std::vector<std::size_t>{1, 3, 8}));
  EXPECT_EQ(s.mean_flip, 4.0);
  EXPECT_EQ(s.median_flip, 3.0);
  const std::string d = describe(s);
  EXPECT_NE(d.find("4 runs"), std::string::npos) << d;
  EXPECT_NE(d.find("3 diverged"), std::string::npos) << d;
  EXPECT_NE(d.find("75.0%"), std::string::npos) << d;
}

TEST(Summary, EvenMedianAndEmpty) {
  const std::vector<PairedRun> runs = {run_with({0.0}, 6), run_with({0.0}, 2), run_with({0.0}, 9), run_with({0.0}, 3)};
  const Summary s = summarize(runs);
  EXPECT_EQ(s.median_flip, 4.5);  // sorted 2 3 6 9: (3 + 6) / 2
  EXPECT_EQ(s.mean_flip, 5.0);
  const Summary e = summarize(std::vector<PairedRun>{});
  EXPECT_EQ(e.runs, 0u);
  EXPECT_EQ(e.divergence_rate, 0.0);
  EXPECT_EQ(e.mean_kl, 0.0);
  EXPECT_EQ(e.median_flip, 0.0);
  EXPECT_EQ(PairedRun{}.mean_kl(), 0.0);
  EXPECT_STREQ(regime_name(Regime::free_running), "free");
  EXPECT_STREQ(regime_name(Regime::teacher_forced), "teacher");
}

// ---- paired runs on a small random model -----------------------------------------------------------------------

// A Llama-style model: vocab 64, hidden 32, 2 layers, 4 query heads over 2 KV heads (GQA 2:1), head_dim 8.
engine::Model random_model(std::uint64_t seed) {
  engine::Model m;
  engine::ModelConfig& c = m.config;
  c.arch = engine::Arch::llama;
  c.vocab = 64;
  c.hidden = 32;
  c.intermediate = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.max_positions = 256;
  c.rms_eps = 1e-5;
  c.sliding_layers.assign(c.n_layers, false);
  m.storage = Format::fp32;
  m.source = "random_model";
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  const auto fill = [&](std::vector<float>& v, std::size_t n, double sd, double mean = 0.0) {
    v.resize(n);
    for (float& x : v) x = static_cast<float>(mean + sd * nd(g));
  };
  const std::size_t h = c.hidden, I = c.intermediate, q = c.q_dim(), kv = c.kv_dim();
  fill(m.embed, c.vocab * h, 1.0);  // (vocab, hidden)
  m.layers.resize(c.n_layers);
  for (engine::LayerWeights& L : m.layers) {
    fill(L.attn_norm, h, 0.05, 1.0);
    fill(L.wq, q * h, 1 / std::sqrt(double(h)));    // (q_dim, hidden)
    fill(L.wk, kv * h, 1 / std::sqrt(double(h)));   // (kv_dim, hidden)
    fill(L.wv, kv * h, 1 / std::sqrt(double(h)));   // (kv_dim, hidden)
    fill(L.wo, h * q, 0.5 / std::sqrt(double(q)));  // (hidden, q_dim)
    fill(L.mlp_norm, h, 0.05, 1.0);
    fill(L.w_gate, I * h, 1 / std::sqrt(double(h)));    // (intermediate, hidden)
    fill(L.w_up, I * h, 1 / std::sqrt(double(h)));      // (intermediate, hidden)
    fill(L.w_down, h * I, 0.5 / std::sqrt(double(I)));  // (hidden, intermediate)
  }
  fill(m.final_norm, h, 0.05, 1.0);
  fill(m.lm_head, c.vocab * h, 3 / std::sqrt(double(h)));  // (vocab, hidden)
  return m;
}

class Paired : public ::testing::Test {
 protected:
  Paired()
      : registry_(kernels::cpu_registry()),
        m32_(random_model(777)),
        m16_(engine::convert(m32_, Format::fp16)),
        fp32_(m32_, engine::resolve(engine::find_profile("fp32"), registry_)),
        fp16_(m16_, engine::resolve(engine::find_profile("fp16-eager"), registry_)) {}

  // The last row of every hidden state of ctx's last call: (n_layers + 1) × (hidden).
  static std::vector<std::vector<float>> last_rows(const engine::Context& ctx) {
    std::vector<std::vector<float>> out;
    const std::size_t h = ctx.model().config.hidden;
    for (const auto& hl : ctx.trace().hidden) out.emplace_back(hl.end() - static_cast<std::ptrdiff_t>(h), hl.end());
    return out;
  }

  kernels::Registry registry_;  // outlives the contexts
  engine::Model m32_, m16_;
  engine::Context fp32_, fp16_;
  const std::vector<int> prompt_ = {1, 17, 42, 5, 33, 8, 60, 21};
};

// Independent maximum |a − b| (float → double).
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

TEST_F(Paired, FreeRunMatchesTheEngineDrivenDirectly) {
  PairOptions o;
  o.steps = 10;
  o.keep_logits = true;
  // `on`: fp16-eager, `off`: fp32 — two different functions, so the metrics must be nonzero.
  const PairedRun r = run_free(fp16_, fp32_, prompt_, o);
  engine::GenerateOptions g;
  g.steps = 10;
  g.keep_logits = true;
  const engine::GenerateResult a = engine::generate(fp16_, prompt_, engine::CacheMode::on, g);
  const engine::GenerateResult b = engine::generate(fp32_, prompt_, engine::CacheMode::off, g);
  EXPECT_EQ(r.regime, Regime::free_running);
  EXPECT_EQ(r.prompt, prompt_);
  EXPECT_EQ(r.tokens_on, a.tokens);
  EXPECT_EQ(r.tokens_off, b.tokens);
  ASSERT_EQ(r.logits_on, a.logits);
  ASSERT_EQ(r.logits_off, b.logits);
  ASSERT_EQ(r.steps.size(), 10u);
  std::optional<std::size_t> flip;
  for (std::size_t t = 0; t < 10; ++t) {
    const StepMetrics& m = r.steps[t];
    EXPECT_EQ(m.step, t);
    EXPECT_EQ(m.token_on, a.tokens[t]);
    EXPECT_EQ(m.token_off, b.tokens[t]);
    EXPECT_EQ(m.top_on.top1, a.tokens[t]);  // greedy picks the arg-max
    EXPECT_EQ(m.top_off.top1, b.tokens[t]);
    EXPECT_EQ(m.max_abs_logit_diff, max_diff(a.logits[t], b.logits[t]));
    EXPECT_GT(m.max_abs_logit_diff, 0.0);  // fp16 rounding vs fp32
    EXPECT_GT(m.kl, 0.0);
    EXPECT_GE(m.js, 0.0);
    EXPECT_LE(m.js, std::numbers::ln2);
    EXPECT_TRUE(m.layer_drift.empty());
    if (!flip && a.tokens[t] != b.tokens[t]) flip = t;
  }
  EXPECT_EQ(r.flip, flip);
  PairOptions lean = o;
  lean.keep_logits = false;
  EXPECT_TRUE(run_free(fp16_, fp32_, prompt_, lean).logits_on.empty());
}

TEST_F(Paired, SameContextAndSamplerDrawsAreShared) {
  PairOptions o;
  o.steps = 12;
  o.sampler.strategy = engine::Strategy::top_p;
  o.sampler.top_p = 0.95;
  o.sampler.seed = 31;
  const PairedRun r = run_free(fp32_, fp32_, prompt_, o);  // one context serves both paths
  engine::GenerateOptions g;
  g.steps = 12;
  g.sampler = o.sampler;
  EXPECT_EQ(r.tokens_on, engine::generate(fp32_, prompt_, engine::CacheMode::on, g).tokens);
  EXPECT_EQ(r.tokens_off, engine::generate(fp32_, prompt_, engine::CacheMode::off, g).tokens);
  EXPECT_EQ(r.flip, flip_index(r.tokens_on, r.tokens_off));
}

TEST_F(Paired, TeacherForcedFeedsBothPathsTheSameTokens) {
  const std::vector<int> forced = {3, 9, 27, 17, 51, 24};
  PairOptions o;
  o.steps = 99;  // ignored: forced sets the count
  o.keep_logits = true;
  o.layer_drift = true;
  const PairedRun r = run_teacher_forced(fp16_, fp32_, prompt_, forced, o);
  EXPECT_EQ(r.regime, Regime::teacher_forced);
  ASSERT_EQ(r.steps.size(), forced.size());
  ASSERT_EQ(r.tokens_on.size(), forced.size());
  // Drive both contexts by hand: step t's state follows prompt + forced[0..t).
  engine::ForwardOptions cap;
  cap.capture_hidden = true;
  std::vector<int> seq = prompt_;
  fp16_.reset();
  for (std::size_t t = 0; t < forced.size(); ++t) {
    const std::vector<float> on = t == 0 ? fp16_.prefill(seq, cap) : fp16_.decode(seq.back(), cap);
    const auto rows_on = last_rows(fp16_);
    const std::vector<float> off = fp32_.recompute(seq, cap);
    const auto rows_off = last_rows(fp32_);
    EXPECT_EQ(r.logits_on[t], on) << t;
    EXPECT_EQ(r.logits_off[t], off) << t;
    const StepMetrics& m = r.steps[t];
    ASSERT_EQ(m.layer_drift.size(), m32_.config.n_layers + 1) << t;
    ASSERT_EQ(rows_on.size(), m.layer_drift.size());
    for (std::size_t l = 0; l < rows_on.size(); ++l) {
      double d2 = 0;  // ‖a − b‖² by hand
      for (std::size_t i = 0; i < rows_on[l].size(); ++i) d2 += std::pow(double(rows_on[l][i]) - rows_off[l][i], 2);
      EXPECT_NEAR(m.layer_drift[l].l2, std::sqrt(d2), 1e-12 * (1 + std::sqrt(d2))) << "step " << t << " layer " << l;
    }
    // The embedding row of the same token differs only by the fp16 rounding of the table: RNE moves each element
    // by at most 2^-11 of itself, so 0 < ‖e16 − e32‖ ≤ 2^-11 ‖e32‖.
    double e2 = 0;
    for (float x : rows_off[0]) e2 += double(x) * x;
    EXPECT_GT(m.layer_drift.front().l2, 0.0) << t;
    EXPECT_LE(m.layer_drift.front().l2, std::ldexp(std::sqrt(e2), -11)) << t;
    seq.push_back(forced[t]);
  }
}

TEST_F(Paired, SharedTokensHaveZeroEmbeddingDrift) {
  // One profile for both paths: the embedding row (hidden[0]) of a shared token is the same table row — drift 0,
  // cosine 1 — in both regimes; deeper layers may differ only by the kernels' shape-dependent rounding.
  PairOptions o;
  o.steps = 8;
  o.layer_drift = true;
  const std::vector<int> forced = {4, 4, 12, 63, 3, 10, 11, 2};
  const PairedRun tf = run_teacher_forced(fp32_, fp32_, prompt_, forced, o);
  for (const StepMetrics& m : tf.steps) {
    EXPECT_EQ(m.layer_drift.front().l2, 0.0) << m.step;
    EXPECT_EQ(m.layer_drift.front().cosine, 1.0) << m.step;
  }
  const PairedRun fr = run_free(fp32_, fp32_, prompt_, o);
  ASSERT_EQ(fr.steps.size(), 8u);
  const std::size_t same = fr.flip.value_or(fr.steps.size());
  // Step t's last row is the token fed at step t − 1 (step 0: the last prompt token).
  for (std::size_t t = 0; t <= same && t < fr.steps.size(); ++t)
    EXPECT_EQ(fr.steps[t].layer_drift.front().l2, 0.0) << t;
}

}  // namespace
}  // namespace kvconf::analysis
