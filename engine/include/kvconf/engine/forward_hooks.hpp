// The forward pass's seam for the model's arithmetic: the points where it may be varied (ForwardHooks), each the
// plain model's value by default; a Context takes them through ContextOptions::hooks. The forward pass (forward.cpp
// and its seams forward_rows.cpp, kv_store.cpp) calls these and names no fault; the planted engine faults
// (kvconf::engine_faults, engine/faults/) are one implementation of them, kept beside the engine as kernels/mutants
// keeps the kernel mutants beside the kernels.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "kvconf/engine/config.hpp"
#include "kvconf/kernels/kernel.hpp"
#include "kvconf/numerics/format.hpp"

namespace kvconf::engine {

// `decode`: the call is one row on the cached path after a prefill; `cached_path`: prefill or decode (not the
// cache-OFF recompute).
class ForwardHooks {
 public:
  virtual ~ForwardHooks() = default;
  // The attention call as the model defines it (window, scale, softcap); a hook may change it.
  virtual void attention_call(kernels::AttentionCall& /*a*/, const ModelConfig& /*c*/, bool /*cached_path*/,
                              bool /*decode*/) const {}
  // RMSNorm's epsilon.
  virtual float norm_eps(const ModelConfig& c) const;
  // Gemma-2's embedding scale: √hidden rounded to the model format.
  virtual double embed_scale(const ModelConfig& c, Format fmt) const;
  // The position the call's first row is rotated at.
  virtual std::size_t rope_position(std::size_t pos, bool /*decode*/) const { return pos; }
  // The cache row the call's first row is written to.
  virtual std::size_t cache_write_row(std::size_t pos0, bool /*decode*/) const { return pos0; }
  // After the call's rows (elements [begin, end)) were stored into one layer's K or V buffer.
  virtual void after_cache_store(std::vector<float>& /*side*/, std::size_t /*begin*/, std::size_t /*end*/,
                                 Format /*fmt*/, bool /*cached_path*/, bool /*decode*/) const {}
  // Runs the attention kernel: out = attention(q, kc, vc).
  virtual void attention(const kernels::AttentionKernel& ak, const kernels::AttentionCall& a,
                         const std::vector<float>& q, const std::vector<float>& kc, const std::vector<float>& vc,
                         std::vector<float>& out, bool /*decode*/) const {
    ak.run(a, q, kc, vc, out);
  }
  // The MLP's activation: act = silu(gate) or gelu_tanh(gate), (rows, intermediate), in the model format.
  virtual void activation(Format f, const ModelConfig& c, std::span<const float> gate, std::span<float> act) const;
  // Whether the final logit softcap applies.
  virtual bool final_softcap(const ModelConfig& c, bool /*decode*/) const { return c.final_softcap > 0.0; }
};

// The plain model.
const ForwardHooks& plain_forward();

}  // namespace kvconf::engine
