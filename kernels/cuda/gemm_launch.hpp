// Private to the GPU GEMMs: launchers of the hand-written CUDA GEMM kernels (kernels/cuda/gemm_fixed.cu,
// gemm_rowdot.cu), called from kernels/cublas/gemm_gpu_cuda.cpp: host C++ without cuda_fp16.h. Device pointers only;
// fp16 values travel as their uint16_t bit patterns. Each launch is asynchronous on `stream` and returns the launch
// error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kvconf::kernels::gpu_gemm {

// cuda.gemm.fixed.f16. x: (m, k), w: (n, k), y: (m, n), row-major fp16. One thread per output element, k
// ascending: acc = fl32(x_0·w_0), then acc = fmaf_rn(x_i, w_i, acc) for i = 1 .. k−1 (one fp32 rounding per
// step, no FTZ), y = fp16_rn(acc); k = 0 gives +0. The same for every m (no shape-dependent path).
cudaError_t launch_gemm_fixed_f16(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::size_t m,
                                  std::size_t n, std::size_t k, cudaStream_t stream);

// cuda.gemm.rowdot.f32acc. Shapes as above. One warp of 32 lanes per output element: lane l takes
// i = l, l+32, l+64, ... ascending, acc_l = fl32(x_l·w_l) then fmaf_rn chains (+0 when l >= k); then the xor
// butterfly with offsets 16, 8, 4, 2, 1 (fadd_rn), lane 0 rounded to fp16 (RN). numerics' order:
// ThreadStrided{threads 32, vec 1, no split lanes, interleave 1, combine fp32, warp_first}.
cudaError_t launch_gemm_rowdot_f16(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::size_t m,
                                   std::size_t n, std::size_t k, cudaStream_t stream);

}  // namespace kvconf::kernels::gpu_gemm
