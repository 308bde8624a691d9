// The libtorch-off stand-ins: the torch kernels still register under their stable names, their supports()
// return unavailable()'s reason, and the calls (never reached through a suite) throw.
#include <stdexcept>

#include "torch_ops.hpp"

namespace kvconf::kernels::torch_ops {

std::optional<std::string> unavailable() {
  return std::string("built without libtorch (torch not importable by KVCONF_PYTHON at configure time; run "
                     "scripts/setup.sh)");
}

std::string description() { return *unavailable(); }

std::optional<std::string> sdpa_choice(Sdpa, Format, const AttentionCall&, Calling, std::string* why) {
  if (why) *why = *unavailable();
  return std::nullopt;
}

void sdpa(Sdpa, Format, Calling, const AttentionCall&, std::span<const float>, std::span<const float>,
          std::span<const float>, std::span<float>) {
  throw std::runtime_error(*unavailable());
}

void linear(Format, const GemmShape&, std::span<const float>, std::span<const float>, std::span<float>) {
  throw std::runtime_error(*unavailable());
}

void hf_rms_norm(Format, const NormShape&, const NormParams&, std::span<const float>, std::span<const float>,
                 std::span<float>) {
  throw std::runtime_error(*unavailable());
}

}  // namespace kvconf::kernels::torch_ops
