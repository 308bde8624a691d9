// The libtorch-off stand-ins: the torch kernels still register under their stable names, their supports()
// return unavailable()'s reason, and the calls (never reached through a suite) throw.
#include <stdexcept>

#include "torch_ops.hpp"

namespace kvconf::kernels::torch_ops {

std::optional<std::string> unavailable(Device) {
  return std::string(
      "built without libtorch (torch not importable by KVCONF_PYTHON at configure time; run "
      "scripts/setup.sh)");
}

std::string description(Device d) { return *unavailable(d); }

std::optional<std::string> sdpa_choice(Device, Sdpa, Format, const AttentionCall&, Calling, std::string* why) {
  if (why) *why = *unavailable(Device::cpu);
  return std::nullopt;
}

void sdpa(Device, Sdpa, Format, Calling, const AttentionCall&, std::span<const float>, std::span<const float>,
          std::span<const float>, std::span<float>) {
  throw std::runtime_error(*unavailable(Device::cpu));
}

std::optional<std::string> sdpa_batch_choice(Device, Sdpa, Format, std::span<const AttentionCall>, std::string* why) {
  if (why) *why = *unavailable(Device::cpu);
  return std::nullopt;
}

void sdpa_batch(Device, Sdpa, Format, std::span<const AttentionSeq>) {
  throw std::runtime_error(*unavailable(Device::cpu));
}

void linear(Device, Format, const GemmShape&, std::span<const float>, std::span<const float>, std::span<float>) {
  throw std::runtime_error(*unavailable(Device::cpu));
}

void hf_rms_norm(Device, Format, const NormShape&, const NormParams&, std::span<const float>, std::span<const float>,
                 std::span<float>) {
  throw std::runtime_error(*unavailable(Device::cpu));
}

}  // namespace kvconf::kernels::torch_ops
