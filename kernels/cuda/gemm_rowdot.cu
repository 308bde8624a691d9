// cuda.gemm.rowdot.f32acc: a non-tensor-core fp16 GEMM with fp32 accumulation in a blocked order that
// numerics::dot reproduces bit for bit (docs/GPU.md "Projections"). y = x·Wᵀ with x: (m, k), w: (n, k),
// y: (m, n), row-major fp16 on the device.
//
// What every output element y[r][j] is, exactly: one warp of 32 lanes computes it.
//   lane l (0 .. 31) takes i = l, l+32, l+64, ... < k, ascending:
//     a_l = __fmul_rn(x[r][l], w[j][l]), then a_l = __fmaf_rn(x[r][i], w[j][i], a_l)  (fp32, one rounding each)
//     a lane with no term (l >= k) holds +0
//   butterfly: for o = 16, 8, 4, 2, 1: a_l = __fadd_rn(a_l, a_{l xor o})  (every lane; lane 0's value is the
//     halving tree v[l] = v[l] + v[l+o], l < o, of numerics' warp_first tree: fp32 addition is commutative)
//   y[r][j] = __float2half_rn(a_0)
// = numerics::dot(AccumSpec{in fp16, acc fp32, out fp16, fma = true, RNE, no FTZ},
//                 ThreadStrided{threads 32, vec 1, split_lanes false, interleave 1, combine fp32, warp_first}).
// The order depends on k only (never on m, n or where the warp sits), so M = 1 and M = n rows are bitwise equal.
// Explicit _rn intrinsics (no contraction); compiled without fast math (checked below).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gemm_launch.hpp"

#if defined(__USE_FAST_MATH__)
#error "kernels/cuda/gemm_rowdot.cu must be compiled without --use_fast_math (its order is emulated bit for bit)"
#endif

namespace kvconf::kernels::gpu_gemm {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;  // 8 output elements per block of 256 threads

__global__ void gemm_rowdot_f16_kernel(const __half* __restrict__ x, const __half* __restrict__ w,
                                       __half* __restrict__ y, std::size_t m, std::size_t n, std::size_t k) {
  const int lane = threadIdx.x % kWarp;
  const std::size_t e = static_cast<std::size_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;  // output
  if (e >= m * n) return;  // e is the same for the 32 lanes of a warp: whole warps leave, the shuffles stay full
  const std::size_t r = e / n, j = e % n;
  const __half* xr = x + r * k;  // (k)
  const __half* wj = w + j * k;  // (k)
  float acc = 0.0f;
  for (std::size_t i = static_cast<std::size_t>(lane); i < k; i += kWarp) {
    const float a = __half2float(xr[i]), b = __half2float(wj[i]);  // exact
    acc = (i < static_cast<std::size_t>(kWarp)) ? __fmul_rn(a, b) : __fmaf_rn(a, b, acc);
  }
  for (int o = kWarp / 2; o >= 1; o /= 2) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  if (lane == 0) y[e] = __float2half_rn(acc);
}

}  // namespace

cudaError_t launch_gemm_rowdot_f16(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::size_t m,
                                   std::size_t n, std::size_t k, cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  const std::size_t blocks = (m * n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
  gemm_rowdot_f16_kernel<<<static_cast<unsigned>(blocks), kWarp * kWarpsPerBlock, 0, stream>>>(
      reinterpret_cast<const __half*>(x), reinterpret_cast<const __half*>(w), reinterpret_cast<__half*>(y), m, n, k);
  return cudaGetLastError();
}

}  // namespace kvconf::kernels::gpu_gemm
