// Small in-memory models of the three architectures with seeded random weights, for the engine's unit tests (the
// fixtures/ checkpoints go through the file loaders; these do not need files).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kvconf/engine/model.hpp"
#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::engine::testing {

inline ModelConfig small_config(Arch arch) {
  ModelConfig c;
  c.arch = arch;
  c.vocab = 300;
  c.hidden = 64;
  c.intermediate = 96;
  c.n_layers = 2;
  c.head_dim = 32;
  c.max_positions = 512;
  c.rms_eps = 1e-5;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  if (arch == Arch::mistral) c.n_heads = 4, c.n_kv_heads = 2, c.rope_theta = 1e6;
  if (arch == Arch::gemma2) {
    c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 32;
    c.act = Activation::gelu_tanh;
    c.tie_embeddings = true;
    c.sliding_window = 4;
    c.sliding_layers = {true, false};
    c.attn_softcap = 50.0;
    c.final_softcap = 30.0;
    c.query_pre_attn_scalar = 32.0;
    c.norm_one_plus_weight = c.post_norms = c.scale_embeddings = true;
    c.rms_eps = 1e-6;
  } else {
    c.sliding_layers.assign(c.n_layers, false);
  }
  return c;
}

// Weights ~ N(0, σ²) rounded to `storage`: σ = 1/√in for projections, 3/√hidden for the head and Gemma's tied
// embeddings, 1 for Llama/Mistral embeddings; norm weights near 1 (Gemma: near 0, used as 1 + w).
inline Model random_model(const ModelConfig& c, Format storage, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto normal = [&](std::size_t n, double sigma, double mean = 0.0) {
    std::vector<float> v(n);
    for (float& x : v) {
      const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53,
                   u2 = static_cast<double>(rng() >> 11) * 0x1p-53;
      x = kernels::round_double(storage, mean + sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2));
    }
    return v;
  };
  const double norm_mean = c.norm_one_plus_weight ? 0.0 : 1.0;
  const std::size_t D = c.hidden, I = c.intermediate;
  Model m;
  m.config = c;
  m.storage = storage;
  m.embed = normal(c.vocab * D, c.tie_embeddings ? 3.0 / std::sqrt(double(D)) : 1.0);
  for (std::size_t l = 0; l < c.n_layers; ++l) {
    LayerWeights w;
    w.attn_norm = normal(D, 0.05, norm_mean);
    w.wq = normal(c.q_dim() * D, 1.0 / std::sqrt(double(D)));
    w.wk = normal(c.kv_dim() * D, 1.0 / std::sqrt(double(D)));
    w.wv = normal(c.kv_dim() * D, 1.0 / std::sqrt(double(D)));
    w.wo = normal(D * c.q_dim(), 0.5 / std::sqrt(double(c.q_dim())));
    if (c.post_norms) w.post_attn_norm = normal(D, 0.05, norm_mean), w.post_mlp_norm = normal(D, 0.05, norm_mean);
    w.mlp_norm = normal(D, 0.05, norm_mean);
    w.w_gate = normal(I * D, 1.0 / std::sqrt(double(D)));
    w.w_up = normal(I * D, 1.0 / std::sqrt(double(D)));
    w.w_down = normal(D * I, 0.5 / std::sqrt(double(I)));
    m.layers.push_back(std::move(w));
  }
  m.final_norm = normal(D, 0.05, norm_mean);
  if (!c.tie_embeddings) m.lm_head = normal(c.vocab * D, 3.0 / std::sqrt(double(D)));
  m.source = "random_model";
  return m;
}

inline std::vector<int> random_tokens(std::size_t n, std::size_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> t(n);
  t[0] = 1;
  for (std::size_t i = 1; i < n; ++i) t[i] = 3 + static_cast<int>(rng() % (vocab - 3));
  return t;
}

}  // namespace kvconf::engine::testing
