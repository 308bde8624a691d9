// The plain model's values at the forward pass's seam (forward_hooks.hpp): RMSNorm's epsilon, Gemma-2's embedding
// scale rounded to the model format, the MLP activation, and plain_forward(), the hooks of a context without a planted
// fault.
#include "kvconf/engine/forward_hooks.hpp"

#include <cmath>

#include "kvconf/kernels/fast_fp.hpp"
#include "ops.hpp"

namespace kvconf::engine {

float ForwardHooks::norm_eps(const ModelConfig& c) const { return static_cast<float>(c.rms_eps); }

double ForwardHooks::embed_scale(const ModelConfig& c, Format fmt) const {
  return kernels::round_double(fmt, std::sqrt(static_cast<double>(c.hidden)));
}

void ForwardHooks::activation(Format f, const ModelConfig& c, std::span<const float> gate, std::span<float> act) const {
  ops::activation(f, c.act, gate, act);
}

const ForwardHooks& plain_forward() {
  static const ForwardHooks plain;
  return plain;
}

}  // namespace kvconf::engine
