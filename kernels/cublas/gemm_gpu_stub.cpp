// The GPU GEMMs built without CUDA: the entries are still registered (so suites list them and skip with the
// reason), run() throws, the weight-cache API does nothing, and the tensor-core parameters are the H100 preset.
#include <stdexcept>

#include "gemm_gpu_backend.hpp"
#include "kvconf/kernels/cublas.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels {
namespace gpu_gemm {

// gpu_unavailable() (kernels/cuda's stub) says "built without CUDA ..."; the fallback is for safety only.
Reason unavailable() {
  if (auto why = gpu_unavailable()) return why;
  return std::string("built without CUDA: the cuda.gemm.* kernels need a CUDA build");
}

void run(Which, const GemmShape&, std::span<const float>, std::span<const float>, std::span<float>) {
  throw std::runtime_error("kvconf cuda.gemm.*: " + *unavailable());
}

}  // namespace gpu_gemm

void drop_gpu_weight_cache() {}
GpuWeightCacheStats gpu_weight_cache_stats() { return {}; }
void pin_gpu_weights(const float*, std::size_t) {}
void unpin_gpu_weights(const float*, std::size_t) {}
TensorCoreParams gpu_tensor_core_params() { return TensorCoreParams::h100(); }
std::string gpu_tensor_core_model() { return "h100 (preset; built without CUDA)"; }

}  // namespace kvconf::kernels
