// The device bandwidth probe (CUDA build): cudaMemcpy device-to-device of `bytes`, timed with CUDA events on the
// default stream, one warm-up copy then the best of `reps`; bandwidth = 2·bytes / time (read + write). Host code only
// (the CUDA runtime API): compiled by the C++ compiler against CUDA::cudart, no nvcc.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>

#include "device_bandwidth.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::bench {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("device copy bandwidth: ") + what + " returned " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

}  // namespace

std::optional<std::string> device_bandwidth_unavailable() { return kernels::gpu_unavailable(); }

Bandwidth measure_device_copy_bandwidth(std::size_t bytes, int reps) {
  if (const auto why = device_bandwidth_unavailable()) throw std::runtime_error("device copy bandwidth: " + *why);
  void* a = nullptr;
  void* b = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  float best_ms = 1e30f;
  try {
    check(cudaMalloc(&a, bytes), "cudaMalloc");
    check(cudaMalloc(&b, bytes), "cudaMalloc");
    check(cudaMemset(a, 1, bytes), "cudaMemset");
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    check(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy (warm-up)");
    for (int r = 0; r < reps; ++r) {
      check(cudaEventRecord(start), "cudaEventRecord");
      check(cudaMemcpy(r % 2 ? a : b, r % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
      check(cudaEventRecord(stop), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0.0f;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      best_ms = std::min(best_ms, ms);
    }
  } catch (...) {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    cudaFree(a);
    cudaFree(b);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  return Bandwidth{2.0 * static_cast<double>(bytes) / (static_cast<double>(best_ms) * 1e-3), bytes, reps,
                   "cudaMemcpy D2D on " + kernels::gpu_device_name()};
}

}  // namespace kvconf::bench
