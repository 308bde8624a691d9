// Elementwise ops of the forward pass, rounded as PyTorch rounds them ("opmath"): each op is computed in fp32 from
// storage-format values and its result rounded once to the storage format. Spans are row-major.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "kvconf/engine/config.hpp"
#include "kvconf/numerics/format.hpp"

namespace kvconf::engine::ops {

void add(Format f, std::span<const float> a, std::span<const float> b, std::span<float> out);  // fl(a + b)
void mul(Format f, std::span<const float> a, std::span<const float> b, std::span<float> out);  // fl(a · b)
void scale(Format f, std::span<float> x, float s);                                             // x ← fl(x · s)
// SiLU: fl(x / (1 + exp(−x))) (PyTorch silu); GELU tanh: fl(0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))))
// (gelu(approximate='tanh'), HF "gelu_pytorch_tanh"), the inner expression in fp32.
void activation(Format f, Activation a, std::span<const float> x, std::span<float> out);
// Gemma-2 final logit softcap: z ← fl(fl(tanh(fl(z / c))) · c), three roundings as three PyTorch ops.
void softcap(Format f, std::span<float> z, float cap);

// RoPE tables for one position: cos/sin of (pos · inv_freq_i), i < d/2, computed in fp32 and rounded to `f`
// (HF LlamaRotaryEmbedding: inv_freq = 1 / θ^(2i/d) in fp32, freqs = inv_freq · pos in fp32, cos/sin in fp32, then
// .to(dtype); llama2.c run.c: the same formula in fp32).
struct RopeRow {
  std::vector<float> cos, sin;  // (d/2)
};
RopeRow rope_row(Format f, double theta, std::size_t d, std::size_t pos);

// Rotates x: (rows, heads, d) in place; row r is at absolute position positions[r].
// HF layout (rotate_half): pair (i, i + d/2), out_i = fl(fl(x_i·c_i) + fl(−x_{i+d/2}·s_i)),
// out_{i+d/2} = fl(fl(x_{i+d/2}·c_i) + fl(x_i·s_i)). Interleaved (llama2.c): pair (2i, 2i + 1),
// out_2i = fl(fl(v0·c) − fl(v1·s)), out_2i+1 = fl(fl(v0·s) + fl(v1·c)).
void rope(Format f, const ModelConfig& c, std::span<float> x, std::size_t heads,
          std::span<const std::size_t> positions);

}  // namespace kvconf::engine::ops
