// EngineMatchesOracle: one decoder layer of the engine checked stage by stage against the oracle composed from
// reference/. Each stage's output is compared with the exact function of the engine's OWN inputs to that stage (so
// errors do not compound), within that stage's a-priori bound for the kernel path the call took
// (docs/TOLERANCES.md "EngineMatchesOracle (one layer, stage by stage)").
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvconf/conformance/checks.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"

namespace kvconf::conformance {

struct EngineOracleOptions {
  std::vector<std::size_t> layers = {0};  // layers checked (those >= n_layers are ignored)
  // Deterministic subsets for big shapes (0: everything). Rows of a call: evenly spaced, first and last included,
  // for every stage. Output features: evenly spaced, first and last included, for the projections, the activation
  // and the MLP product (the other stages are cheap and always checked in full).
  std::size_t max_rows = 0;
  std::size_t max_features = 0;
};

// One forward call's view of one layer: what the engine computed and the KV cache its attention read.
struct EngineLayerCall {
  const engine::Model* model = nullptr;
  const engine::ProfileKernels* kernels = nullptr;
  std::size_t layer = 0;
  std::size_t pos0 = 0;  // absolute position of the call's first row
  std::size_t rows = 0;  // rows of the call (1 = decode)
  const engine::LayerTrace* trace = nullptr;
  std::span<const float> k_cache;  // (capacity, n_kv_heads, head_dim) this layer's K after the call (post-RoPE)
  std::span<const float> v_cache;  // (capacity, n_kv_heads, head_dim)
  std::size_t capacity = 0;        // rows allocated in the cache (the attention call's capacity)
  std::string prefix;              // rule prefix: "recompute.layer0", "decode.layer1"
};

// The stages of a layer, in forward order (Gemma-2's post-norms only where the config has them):
// attn_norm, q_proj, k_proj, v_proj, q_rope, k_rope, attention, o_proj, [post_attn_norm], attn_residual, mlp_norm,
// gate_proj, up_proj, activation, mlp_product, down_proj, [post_mlp_norm], mlp_residual.
std::vector<std::string> engine_stages(const engine::ModelConfig& c);
// The LayerTrace tensor a stage writes (nullptr for an unknown stage name).
std::vector<float>* stage_output(engine::LayerTrace& t, std::string_view stage);

// Per-element data of one stage (unit tests use it to move an output just past its bound).
struct StageElements {
  std::vector<std::size_t> index;  // flat index into the stage's output tensor of the LayerTrace
  std::vector<double> lo, hi;      // enclosure of the exact value (lo <= exact <= hi)
  std::vector<double> bound;       // a-priori bound of |engine − exact|
};
using StageElementMap = std::map<std::string, StageElements>;  // by stage name

// One CheckResult per stage, rule "<prefix>.<stage>.oracle_bound" (every checked element within its bound; a
// vacuous (+inf) bound fails), plus "<prefix>.kv_cache_write.bitwise" (the cache rows of the call hold the call's
// post-RoPE K and V). `elements`, when given, receives every checked element of every stage.
CheckResults check_engine_layer(const EngineLayerCall& call, const EngineOracleOptions& options, std::uint64_t seed,
                                StageElementMap* elements = nullptr);

// Runs the model on `tokens` (at least 2) both ways with capture_layers: cache-OFF recompute(tokens) (prefill-shaped
// calls, M = tokens.size()) and cache-ON prefill(all but the last token) + decode(last token) (M = 1, the decode
// kernels), and checks options.layers of the recompute ("recompute.layerL.*") and of the decode ("decode.layerL.*").
CheckResults check_engine_matches_oracle(const engine::Model& model, const engine::ProfileKernels& kernels,
                                         std::span<const int> tokens, const EngineOracleOptions& options,
                                         std::uint64_t seed, engine::ContextOptions context = {});

// End-to-end a-priori bound of layer 0's cached K (post-RoPE) and V for one row: |cached − exact| per element, where
// exact is RoPE(W_k · rmsnorm(x)) and W_v · rmsnorm(x) of the row's layer input x (hidden: the embedding row, Gemma's
// scaled, the same bits on every path) at position `pos`, the row computed in a call of M rows (the norm path of
// NormShape{M, hidden}, the GEMM path of GemmShape{M, kv_dim, hidden}): the norm's bound carried through |W|, the
// projection's own bound on the rounded inputs, and RoPE's carried through the rotation plus its own. (2·kv_dim): K
// then V, each (n_kv_heads, head_dim). cached_kv uses the sum of two sides' bounds for rows their calls computed by
// different paths.
std::vector<double> layer0_kv_bound(const engine::Model& model, const engine::ProfileKernels& kernels,
                                    std::span<const float> x, std::size_t pos, std::size_t M);

}  // namespace kvconf::conformance
