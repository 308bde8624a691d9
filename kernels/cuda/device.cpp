// gpu_unavailable() and gpu_device_name() in a CUDA build: asks the CUDA runtime once per process whether a device
// of compute capability >= 8.0 (what the kernels are built for: sm_80, sm_90 and their PTX) is present.
#include <cuda_runtime.h>

#include <string>

#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels {
namespace {

struct Probe {
  std::optional<std::string> reason;
  std::string name;
};

Probe probe() {
  Probe p;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    p.reason = std::string("no CUDA device: cudaGetDeviceCount returned ") + cudaGetErrorName(e) + " (" +
               cudaGetErrorString(e) + ")";
    return p;
  }
  if (count < 1) {
    p.reason = "no CUDA device: cudaGetDeviceCount found 0 devices";
    return p;
  }
  cudaDeviceProp prop{};
  if (const cudaError_t pe = cudaGetDeviceProperties(&prop, 0); pe != cudaSuccess) {
    p.reason = std::string("CUDA device 0 unusable: cudaGetDeviceProperties returned ") + cudaGetErrorName(pe);
    return p;
  }
  if (prop.major < 8) {
    p.reason = std::string("CUDA device 0 (") + prop.name + ") has compute capability " + std::to_string(prop.major) +
               "." + std::to_string(prop.minor) + "; the kernels are built for 8.0 and newer";
    return p;
  }
  p.name = prop.name;
  return p;
}

const Probe& probed() {
  static const Probe p = probe();
  return p;
}

}  // namespace

std::optional<std::string> gpu_unavailable() { return probed().reason; }

std::string gpu_device_name() { return probed().name; }

}  // namespace kvconf::kernels
