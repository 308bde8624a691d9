// kvconf check's fp32 replay (protocol::check_trace_pair with a model; docs/TRACES.md): its verdicts on trace pairs
// equal those of the per-step fp32 recompute it replaced, and its S differs from that reference's by no more than
// the two fp32 references differ from each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "kvconf/analysis/metrics.hpp"
#include "kvconf/analysis/paired.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/trace_check.hpp"

namespace kvconf::protocol {
namespace {

namespace fs = std::filesystem;

const kernels::Registry& registry() {
  static const kernels::Registry r = kernels::cpu_registry();
  return r;
}

// One side of a free-running run of kvconf's engine as a trace (no calls: the cache scenario's logit rules only).
Trace side(const analysis::PairedRun& run, bool on, const std::string& dtype, const std::string& prompt_id) {
  Trace t;
  t.file = prompt_id + (on ? ".on" : ".off");
  t.engine = "kvconf";
  t.engine_version = "test";
  t.attention = "eager";
  t.model_name = "llama2-tiny";
  t.dtype = dtype;
  t.cache_on = on;
  t.side_a = on;
  t.prompt_id = prompt_id;
  t.prompt_ids = run.prompt;
  t.generated_ids = on ? run.tokens_on : run.tokens_off;
  t.logits = on ? run.logits_on : run.logits_off;  // (T, V)
  t.vocab = t.logits.front().size();
  t.logits_dtype = "F32";
  return t;
}

const results::CheckResult* rule(const results::RunPairRecord& r, const std::string& name) {
  for (const results::CheckResult& x : r.rules)
    if (x.rule == name) return &x;
  return nullptr;
}

// Side A in fp16 (cache ON), side B in bf16 (cache OFF): the sides part within a few steps, so the flip rules are
// evaluated at a flip and not only over no_flip. The reference the replay replaced: the fp32 engine recomputing the
// whole sequence (cache OFF) at every step. D: how far the replay's fp32 logits (prefill, then one decode per token
// over an fp32 cache) are from those, computed here apart from the replay. |S_replay − S_recompute| <= D_T (the
// triangle inequality), and every verdict the same.
TEST(TraceCheckReplay, VerdictsEqualThePerStepRecompute) {
  const std::vector<conformance::ModelFixture> all = conformance::model_fixtures(KVCONF_FIXTURES_DIR, "");
  const conformance::ModelFixture& fx = conformance::model_fixture(all, "llama2-tiny");
  if (auto why = conformance::fixture_missing(fx)) GTEST_SKIP() << *why;
  const engine::Model& m32 = conformance::fixture_model(fx, Format::fp32);
  engine::Context fp16(conformance::fixture_model(fx, Format::fp16),
                       engine::resolve(engine::find_profile("fp16-eager"), registry()));
  engine::Context bf16(conformance::fixture_model(fx, Format::bf16),
                       engine::resolve(engine::find_profile("bf16-eager"), registry()));
  engine::Context ref(m32, engine::resolve(engine::find_profile("fp32"), registry()));
  analysis::PairOptions po;
  po.steps = 16;
  po.keep_logits = true;
  std::size_t flips = 0;
  for (const analysis::Prompt& prompt : conformance::fixture_prompts(fx, 3, 48)) {
    SCOPED_TRACE(prompt.id);
    const analysis::PairedRun run = analysis::run_free(fp16, bf16, prompt.ids, po);
    TracePair p{side(run, true, "float16", prompt.id), side(run, false, "bfloat16", prompt.id)};
    double replay_diff = -1.0;
    const results::RunPairRecord rec = check_trace_pair(p, &m32, &replay_diff);

    // The per-step recompute reference, and D_s = ‖z_cache,s − z_recompute,s‖∞ of the two fp32 references.
    std::vector<std::vector<float>> z_rec;
    std::vector<double> d;
    std::vector<int> seq = prompt.ids;
    ref.reset();
    for (std::size_t s = 0; s < run.logits_off.size(); ++s) {
      z_rec.push_back(ref.recompute(seq));
      const std::vector<float> z_cache = s == 0 ? ref.prefill(prompt.ids) : ref.decode(run.tokens_off[s - 1]);
      d.push_back(analysis::max_abs_diff(z_cache, z_rec.back()));
      seq.push_back(run.tokens_off[s]);
    }
    EXPECT_EQ(d.front(), 0.0) << "the fp32 prefill is the recompute of the prompt, bit for bit";
    const conformance::CheckResults want = conformance::flip_rules(
        run, prompt.ids, engine::Strategy::greedy,
        [&](const std::vector<int>& sq) { return z_rec.at(sq.size() - prompt.ids.size()); }, 0);
    const std::size_t T = run.flip ? *run.flip + 1 : run.logits_off.size();
    const double d_T = *std::max_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(T));
    flips += run.flip.has_value();
    for (const results::CheckResult& w : want) {
      const results::CheckResult* got = rule(rec, w.rule);
      ASSERT_NE(got, nullptr) << w.rule;
      EXPECT_EQ(got->pass, w.pass) << w.rule << ": " << got->detail << " vs " << w.detail;
      // perturbation_rounding_sized's bound is 2·S, flip_near_tie's 4·S.
      const double k = w.rule == "flip_near_tie" ? 4.0 : w.rule == "perturbation_rounding_sized" ? 2.0 : 0.0;
      EXPECT_LE(std::fabs(got->bound - w.bound), k * d_T) << w.rule << ": " << got->detail << " vs " << w.detail;
      std::printf("%s %s: bound %.9g (per-step recompute %.9g), D = %.3g, pass %d\n", prompt.id.c_str(), w.rule.c_str(),
                  got->bound, w.bound, d_T, int(got->pass));
    }
    // The replay difference over every step: max_s ‖z_off,s − z_ref,s‖∞, within max_s D_s of the recompute's.
    double recompute_diff = 0.0;
    for (std::size_t s = 0; s < run.logits_off.size(); ++s)
      recompute_diff = std::max(recompute_diff, analysis::max_abs_diff(run.logits_off[s], z_rec[s]));
    EXPECT_LE(std::fabs(replay_diff - recompute_diff), *std::max_element(d.begin(), d.end()));
  }
  EXPECT_GT(flips, 0u) << "no pair flipped: flip_near_tie was never compared";
}

}  // namespace
}  // namespace kvconf::protocol
