// The GPU backends' entry points: whether a CUDA device can run the GPU kernels (and why not), the device's
// name, and the registrations of the CUDA attention kernels (kernels/cuda) and the cuBLAS projections
// (kernels/cublas). GPU kernels always register, whatever the machine (names are stable, so test tables,
// filters and golden keys do not depend on it); where no device can run them, their supports() returns
// gpu_unavailable()'s reason, which the suites turn into GTEST_SKIP. docs/GPU.md.
#pragma once

#include <optional>
#include <string>

#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {

// Why the GPU kernels cannot run here, or nullopt when they can: "built without CUDA (KVCONF_ENABLE_CUDA=OFF)",
// "no CUDA device: cudaGetDeviceCount returned cudaErrorNoDevice (...)", or a device below compute capability 8.0.
// Evaluated once per process (kernels/cuda/device.cpp).
std::optional<std::string> gpu_unavailable();

// Name of CUDA device 0 ("NVIDIA H100 80GB HBM3"), for reports and per-device golden keys; "" when
// gpu_unavailable() gives a reason.
std::string gpu_device_name();

// The CUDA attention kernels cuda.attn.{simple,flash2,splitkv,invariant}.{f16,f32} (kernels/cuda).
void register_cuda_kernels(Registry& r);

// The cuBLAS projections and the fixed-order CUDA GEMM (kernels/cublas).
void register_cublas_kernels(Registry& r);

// A registry holding every GPU kernel: register_cuda_kernels, then register_cublas_kernels
// (library kvconf::kernels_gpu; what the Cuda/ suites instantiate over).
Registry gpu_registry();

}  // namespace kvconf::kernels
