// The planted scenario faults (scenario_faults.hpp) as ScenarioHooks overrides.
#include "kvconf/engine/scenario_faults.hpp"

#include <algorithm>

#include "kvconf/engine/forward_hooks.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::engine {

const char* scenario_fault_name(ScenarioFault f) {
  switch (f) {
    case ScenarioFault::prefix_row_short:
      return "prefix_row_short";
    case ScenarioFault::chunk_boundary_skip:
      return "chunk_boundary_skip";
    case ScenarioFault::refill_forgets_layer:
      return "refill_forgets_layer";
    case ScenarioFault::restore_rounds_cache:
      return "restore_rounds_cache";
    case ScenarioFault::batch_padding_leaks:
      return "batch_padding_leaks";
    case ScenarioFault::preempt_forgets_layer:
      return "preempt_forgets_layer";
    case ScenarioFault::kv_dtype_truncates:
      return "kv_dtype_truncates";
  }
  return "?";
}

std::vector<ScenarioFault> all_scenario_faults() {
  return {ScenarioFault::prefix_row_short,     ScenarioFault::chunk_boundary_skip, ScenarioFault::refill_forgets_layer,
          ScenarioFault::restore_rounds_cache, ScenarioFault::batch_padding_leaks, ScenarioFault::preempt_forgets_layer,
          ScenarioFault::kv_dtype_truncates};
}

Scenario scenario_of(ScenarioFault f) {
  switch (f) {
    case ScenarioFault::prefix_row_short:
      return Scenario::prefix;
    case ScenarioFault::chunk_boundary_skip:
      return Scenario::chunked;
    case ScenarioFault::refill_forgets_layer:
      return Scenario::refill;
    case ScenarioFault::restore_rounds_cache:
      return Scenario::restore;
    case ScenarioFault::batch_padding_leaks:
      return Scenario::batch;
    case ScenarioFault::preempt_forgets_layer:
      return Scenario::preempt;
    case ScenarioFault::kv_dtype_truncates:
      return Scenario::kv_dtype;
  }
  return Scenario::cache;
}

namespace {

struct PrefixRowShort : ScenarioHooks {
  std::size_t prefix_rows(std::size_t shared) const override { return shared == 0 ? 0 : shared - 1; }
};

struct ChunkBoundarySkip : ScenarioHooks {
  std::vector<std::pair<std::size_t, std::size_t>> chunks(std::size_t n, std::size_t chunk) const override {
    auto v = ScenarioHooks::chunks(n, chunk);
    if (v.size() >= 2) {
      ++v[1].first;
      if (v[1].first == v[1].second) v.erase(v.begin() + 1);
    }
    return v;
  }
};

struct RefillForgetsLayer : ScenarioHooks {
  void after_refill(KvCache& cache, Format) const override {
    std::fill_n(cache.k.back().begin(), cache.n * cache.kv_dim, 0.0f);
    std::fill_n(cache.v.back().begin(), cache.n * cache.kv_dim, 0.0f);
  }
};

struct PreemptForgetsLayer : ScenarioHooks {
  void after_preempt(KvCache& cache, Format) const override {
    std::fill_n(cache.k.back().begin(), cache.n * cache.kv_dim, 0.0f);
    std::fill_n(cache.v.back().begin(), cache.n * cache.kv_dim, 0.0f);
  }
};

struct KvDtypeTruncates : ScenarioHooks {
  void store_kv(KvCache& cache, std::size_t r0, std::size_t r1, Format storage, KvFormat f) const override {
    QuantCheck unused;
    for (auto* side : {&cache.k, &cache.v})
      for (auto& layer : *side) quantize_rows(f, layer, cache.kv_dim, r0, r1, storage, true, unused);
  }
};

struct RestoreRoundsCache : ScenarioHooks {
  void after_restore(KvCache& cache, Format fmt) const override {
    for (auto* side : {&cache.k, &cache.v})
      for (auto& layer : *side)
        for (std::size_t i = 0; i < cache.n * cache.kv_dim; ++i)
          layer[i] =
              static_cast<float>(::kvconf::decode(fmt, ::kvconf::encode(fmt, static_cast<double>(layer[i])) & ~1u));
  }
};

// The sequence's K/V rows behind `pad` zero rows (the left padding of a batch padded to its longest sequence, in a
// zero-initialised buffer), attended with no key mask: the causal offset moves by `pad`, so every padding row is seen.
struct BatchPaddingLeaks : ScenarioHooks {
  void run(const ForwardHooks& h, const kernels::AttentionKernel& ak, const kernels::AttentionCall& a,
           const std::vector<float>& q, const std::vector<float>& kc, const std::vector<float>& vc,
           std::vector<float>& out, bool decode, std::size_t longest) const override {
    const std::size_t own = a.shape.n_kv;
    if (longest <= own) return h.attention(ak, a, q, kc, vc, out, decode);
    const std::size_t pad = longest - own, width = kc.size() / a.cap();     // width: KV heads · d
    std::vector<float> k(longest * width, 0.0f), v(longest * width, 0.0f);  // (longest, KV, d)
    std::copy_n(kc.begin(), own * width, k.begin() + static_cast<std::ptrdiff_t>(pad * width));
    std::copy_n(vc.begin(), own * width, v.begin() + static_cast<std::ptrdiff_t>(pad * width));
    kernels::AttentionCall padded = a;
    padded.shape.n_kv = longest;
    padded.capacity = longest;
    padded.params.q_offset += static_cast<std::int64_t>(pad);
    h.attention(ak, padded, q, k, v, out, decode);
  }
};

}  // namespace

const ScenarioHooks& scenario_hooks(ScenarioFault f) {
  static const PrefixRowShort prefix;
  static const ChunkBoundarySkip chunk;
  static const RefillForgetsLayer refill;
  static const RestoreRoundsCache restore;
  static const BatchPaddingLeaks batch;
  static const PreemptForgetsLayer preempt;
  static const KvDtypeTruncates kv_dtype;
  switch (f) {
    case ScenarioFault::prefix_row_short:
      return prefix;
    case ScenarioFault::chunk_boundary_skip:
      return chunk;
    case ScenarioFault::refill_forgets_layer:
      return refill;
    case ScenarioFault::restore_rounds_cache:
      return restore;
    case ScenarioFault::batch_padding_leaks:
      return batch;
    case ScenarioFault::preempt_forgets_layer:
      return preempt;
    case ScenarioFault::kv_dtype_truncates:
      return kv_dtype;
  }
  return plain_scenario();
}

}  // namespace kvconf::engine
