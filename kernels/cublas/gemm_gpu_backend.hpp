// Private to kernels/cublas: the device side of the cuda.gemm.* registry entries (gemm_gpu_register.cpp).
// Implemented by gemm_gpu_cuda.cpp (CUDA builds: cuBLAS, the hand-written kernels, the weight cache) or by
// gemm_gpu_stub.cpp (built without CUDA: unavailable() says so, run() throws).
#pragma once

#include <span>

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::kernels::gpu_gemm {

enum class Which {
  cublas_f16_acc32,  // cublasGemmEx fp16 A/B/C, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT
  cublas_f16_acc16,  // cublasGemmEx fp16 A/B/C, CUBLAS_COMPUTE_16F
  cublas_f32,        // cublasGemmEx fp32 A/B/C, CUBLAS_COMPUTE_32F_PEDANTIC (no TF32)
  fixed_f16,         // kernels/cuda/gemm_fixed.cu
  rowdot_f16,        // kernels/cuda/gemm_rowdot.cu
};

// Why the GPU GEMMs cannot run here (no CUDA build, no device); nullopt when they can.
Reason unavailable();

// y = x·Wᵀ on the device: x: (m, k), w: (n, k), y: (m, n), floats holding values of the input / output
// format (fp16 for all but cublas_f32). Throws std::runtime_error on a CUDA / cuBLAS error or when unavailable.
void run(Which which, const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y);

}  // namespace kvconf::kernels::gpu_gemm
