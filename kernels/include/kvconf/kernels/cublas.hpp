// The GPU GEMM / projection kernels (cuda.gemm.*: cuBLAS fp16/fp32 and the hand-written fixed-order and
// row-dot kernels), their device-resident weight cache, and the tensor-core model parameters of the device.
// Registered by register_cublas_kernels (gpu.hpp). Without CUDA every function here is a harmless stub.
#pragma once

#include <cstddef>
#include <string>

#include "kvconf/numerics/tensor_core.hpp"

namespace kvconf::kernels {

class Registry;

// Adds cuda.gemm.cublas.f16.acc32, cuda.gemm.cublas.f16.acc16, cuda.gemm.cublas.f32, cuda.gemm.fixed.f16 and
// cuda.gemm.rowdot.f32acc (docs/GPU.md "Projections"). Always registers all five; without a device or without
// CUDA their supports() gives the reason. (Also declared in gpu.hpp.)
void register_cublas_kernels(Registry& r);

// Device copies of weight matrices. A GEMM call looks its w span up by (host pointer, element count, device
// format); an entry is reused when its 64-bit checksum of the host values still matches (so a reused host
// address with new contents is re-uploaded), or without checking when the buffer is pinned. Unpinned entries
// are evicted least recently used first beyond KVCONF_GPU_WEIGHT_CACHE_MB (default 4096) MiB.
struct GpuWeightCacheStats {
  std::size_t entries = 0;  // device copies held
  std::size_t bytes = 0;    // device bytes they take
  std::size_t uploads = 0;  // host-to-device weight uploads since the last drop
  std::size_t hits = 0;     // lookups served from a device copy since the last drop
};

// Frees every device copy (pinned ones too) and resets the counters; the next call uploads again.
void drop_gpu_weight_cache();
GpuWeightCacheStats gpu_weight_cache_stats();

// Declares host weights [host, host + count) immutable until drop_gpu_weight_cache(): their lookups skip the
// checksum and they are never evicted (an engine's weights: one upload, no per-step hashing of 7B values).
void pin_gpu_weights(const float* host, std::size_t count);
// Undoes one pin_gpu_weights(host, count) (pins of the same range count: the last unpin ends it). When the range is
// no longer pinned its device copies are freed, so a buffer later allocated at that address is uploaded afresh.
void unpin_gpu_weights(const float* host, std::size_t count);

// Tensor-core block-FMA parameters (notes/numerics.md §2) of CUDA device 0 from its compute capability:
// 7.x -> V100, 8.x -> A100, 9.x and 10.x -> H100 (B200's RZ model has the same k = 16, neab = 2). With no
// device (or no CUDA) the H100 preset. gpu_tensor_core_model() names the choice: "h100 (sm_90, NVIDIA H100 …)".
TensorCoreParams gpu_tensor_core_params();
std::string gpu_tensor_core_model();

}  // namespace kvconf::kernels
