// Private to the CUDA build of kernels/cublas: the one lock every GPU GEMM call and the weight-cache API take,
// checked CUDA calls, host fp16 <-> float conversion, and the device-resident weights (gemm_weight_cache.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>

#include "kvconf/numerics/rounding.hpp"

namespace kvconf::kernels::gpu_gemm {

std::mutex& gpu_mutex();

// Throws std::runtime_error("kvconf cuda.gemm: <what>: <CUDA error name>: <string>") unless e is cudaSuccess.
void check_cuda(cudaError_t e, const char* what);

// v: floats holding fp16 values -> their bit patterns (RNE, exact for fp16 values); out: (v.size()).
void to_fp16_bits(std::span<const float> v, std::uint16_t* out);
// in: (out.size()) fp16 bit patterns -> floats (exact).
void from_fp16_bits(const std::uint16_t* in, std::span<float> out);

// The device copy of w in `fmt` (fp16: bit patterns; fp32: floats), uploaded when absent or changed (see
// cublas.hpp). The caller holds gpu_mutex(); the pointer stays valid until the next device_weights call or
// drop_gpu_weight_cache() (eviction happens only inside device_weights).
const void* device_weights(std::span<const float> w, Format fmt);

}  // namespace kvconf::kernels::gpu_gemm
