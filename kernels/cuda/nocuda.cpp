// The CUDA-off stand-ins (KVCONF_ENABLE_CUDA=OFF): the GPU kernels still register under their stable names, their
// supports() return gpu_unavailable()'s reason, and run() (never reached through a suite) throws.
#include <stdexcept>
#include <string>

#include "cuda_attention.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels {

std::optional<std::string> gpu_unavailable() {
  return std::string("built without CUDA (KVCONF_ENABLE_CUDA=OFF): no GPU kernel can run");
}

std::string gpu_device_name() { return {}; }

namespace cuda {

void run_attention(const char* who, LaunchFn, Format, const AttentionCall&, std::span<const float>,
                   std::span<const float>, std::span<const float>, std::span<float>) {
  throw std::runtime_error(std::string(who) + ": " + *gpu_unavailable());
}

}  // namespace cuda
}  // namespace kvconf::kernels
