// The cross-check of llama.cpp's f32 traces (f32 weights, f32 cache) against kvconf's fp32 engine, shared by the
// fixtures' LlamaCppCrossCheck and SmolLM2's (docs/LLAMA_CPP.md): the same greedy tokens and logits within
// B = 4·S32 (S32: kvconf fp32 against the same function summed in other orders, reordered_fp32_kernels, as
// HfCrossCheck derives it), with the model as llama.cpp runs it.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kvconf/analysis/metrics.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/forward_hooks.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "kvconf/protocol/trace.hpp"
#include "trace_dirs.hpp"

namespace kvconf::testing {

// ggml's CPU GELU as llama.cpp computes it, even in an f32 model (ggml-cpu/vec.h defines GGML_GELU_FP16): x <= -10
// gives 0, x >= 10 gives x, any other x is rounded to fp16 and looked up in a table of fp16 GELU-tanh values, so
// y = fl16(gelu(fl16(x))).
class GgmlGelu : public engine::ForwardHooks {
 public:
  void activation(Format f, const engine::ModelConfig& c, std::span<const float> gate,
                  std::span<float> act) const override {
    if (c.act != engine::Activation::gelu_tanh) return ForwardHooks::activation(f, c, gate, act);
    std::vector<float> g(gate.begin(), gate.end());
    for (float& x : g) x = static_cast<float>(round_to(Format::fp16, x));
    ForwardHooks::activation(f, c, g, act);
    for (std::size_t i = 0; i < act.size(); ++i)
      act[i] = gate[i] <= -10.0f  ? 0.0f
               : gate[i] >= 10.0f ? gate[i]
                                  : static_cast<float>(round_to(Format::fp16, act[i]));
  }
};

// What llama.cpp computes that the fixture's transformers config does not say, each visible on its fixture: the
// converter drops Mistral's sliding window and Gemma-2's query_pre_attn_scalar (llama.cpp then attends over every row
// and scales by head_dim^-1/2), and ggml's GELU goes through an fp16 table.
struct Expectation {
  const char* fixture;
  bool window_dropped = false, scalar_dropped = false, gelu_table = false;
  bool any() const { return window_dropped || scalar_dropped || gelu_table; }
};
inline void PrintTo(const Expectation& e, std::ostream* os) { *os << e.fixture; }

inline const kernels::Registry& crosscheck_registry() {
  static const kernels::Registry r = kernels::cpu_registry();
  return r;
}

// kvconf fp32 (or "fp32-alt", the reordered kernels) over the trace's sequence, cache OFF, logits (T, V), with the
// model as llama.cpp runs it when `as_llama` is set (a copy of `base` only when that changes its config).
inline std::vector<std::vector<float>> replay_as(const engine::Model& base, const Expectation& e,
                                                 const protocol::Trace& t, bool as_llama,
                                                 const std::string& profile = "fp32") {
  engine::Model changed;
  const engine::Model* m = &base;
  if (as_llama && (e.window_dropped || e.scalar_dropped)) {
    changed = base;
    if (e.window_dropped) changed.config.sliding_window = 0;
    if (e.scalar_dropped) changed.config.query_pre_attn_scalar = 0.0;
    m = &changed;
  }
  static const GgmlGelu ggml_gelu;
  engine::ContextOptions o;
  if (as_llama && e.gelu_table) o.hooks = &ggml_gelu;
  const kernels::Registry& reg = crosscheck_registry();
  const engine::ProfileKernels k = profile == "fp32-alt" ? conformance::reordered_fp32_kernels(reg)
                                                         : engine::resolve(engine::find_profile(profile), reg);
  engine::Context ctx(*m, k, o);
  return replay_off(ctx, t);
}

// Every trace (logits F32) against kvconf fp32 with the model as llama.cpp runs it: the same greedy tokens and
// max |Δz| <= B = 4·S32; where that differs from the fixture's own config, kvconf's plain fp32 is more than its own B
// away (the difference is real, and is the one named). A sequence both paths generated is replayed once.
inline void cross_check(const engine::Model& base, const Expectation& e, const std::vector<protocol::Trace>& traces) {
  using Logits = std::vector<std::vector<float>>;
  std::map<std::vector<int>, std::pair<Logits, Logits>> replays;  // prompt + tokens -> (fp32, fp32-alt)
  for (const protocol::Trace& t : traces) {
    SCOPED_TRACE(t.file.string());
    ASSERT_EQ(t.logits_dtype, "F32");
    std::vector<int> seq = t.prompt_ids;
    seq.insert(seq.end(), t.generated_ids.begin(), t.generated_ids.end());
    auto it = replays.find(seq);
    if (it == replays.end())
      it = replays.emplace(seq, std::pair{replay_as(base, e, t, true), replay_as(base, e, t, true, "fp32-alt")}).first;
    const auto& [z, alt] = it->second;
    const double bound = 4.0 * max_diff(alt, z), diff = max_diff(t.logits, z);
    std::size_t mismatch = 0;
    for (std::size_t s = 0; s < z.size(); ++s) mismatch += analysis::top2(z[s]).top1 != t.generated_ids[s];
    EXPECT_EQ(mismatch, 0u) << "kvconf fp32 chooses other greedy tokens than llama.cpp f32";
    EXPECT_GT(bound, 0.0);
    EXPECT_LE(diff, bound) << "max |z_llama.cpp - z_kvconf| = " << diff << ", B = " << bound;
    std::printf("%s %s: max |z_llama.cpp - z_kvconf fp32| = %.3g, B = %.3g (ratio %.3f), %zu greedy mismatches\n",
                e.fixture, t.cache_on ? "cache_on" : "cache_off", diff, bound, diff / bound, mismatch);
    if (e.any()) {  // the fixture's own function, and its own B
      const Logits zp = replay_as(base, e, t, false);
      const double plain = max_diff(t.logits, zp),
                   plain_bound = 4.0 * max_diff(replay_as(base, e, t, false, "fp32-alt"), zp);
      EXPECT_GT(plain, plain_bound) << "the fixture's own config agrees with llama.cpp: the expectation is stale";
      std::printf("  against the fixture's own config: %.3g, its B = %.3g (%.0fx)\n", plain, plain_bound,
                  plain / plain_bound);
    }
  }
}

}  // namespace kvconf::testing
