// cuda.gemm.fixed.f16: the hand-written fixed-order fp16 GEMM that claims cache invariance (docs/GPU.md
// "Projections"). y = x·Wᵀ with x: (m, k), w: (n, k), y: (m, n), row-major fp16 on the device.
//
// What every output element y[r][j] is, exactly (the CPU emulation is numerics::dot with AccumSpec{in fp16,
// acc fp32, out fp16, fma = true, RNE, no FTZ} and Order Sequential, i.e. cpu.gemm.g1.f16's path):
//   acc = __fmul_rn(x[r][0], w[j][0])                        the leaf: one fp32 rounding (exact for fp16 inputs)
//   acc = __fmaf_rn(x[r][i], w[j][i], acc), i = 1 .. k−1     one fused multiply-add, one fp32 rounding each
//   y[r][j] = __float2half_rn(acc)                            one rounding to fp16, nearest-even
//   (k = 0: y = +0)
// Explicit _rn intrinsics, so nvcc's --fmad contraction cannot change the arithmetic; the file is compiled
// without fast math (--ftz=false: fp32 subnormals kept), checked below. The reduction of one element is done
// by one thread, k ascending, whatever m, n, the tile position or the grid: so M = 1 (decode) and M = n
// (prefill) rows are bitwise equal.
//
// Tiling (speed only, not numerics): a 16 × 16 block of threads computes a 16 × 16 output tile; x rows and w
// rows are staged through shared memory in chunks of 32 k-values, and each thread continues its own chain
// over the chunk in ascending k.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gemm_launch.hpp"

#if defined(__USE_FAST_MATH__)
#error "kernels/cuda/gemm_fixed.cu must be compiled without --use_fast_math (its order is emulated bit for bit)"
#endif

namespace kvconf::kernels::gpu_gemm {
namespace {

constexpr int kTile = 16;   // output rows and columns per block
constexpr int kChunk = 32;  // k-values staged per step

__global__ void gemm_fixed_f16_kernel(const __half* __restrict__ x, const __half* __restrict__ w,
                                      __half* __restrict__ y, std::size_t m, std::size_t n, std::size_t k) {
  __shared__ float xs[kTile][kChunk];      // x rows of the tile, chunk [k0, k0 + 32)
  __shared__ float ws[kTile][kChunk + 1];  // w rows of the tile (+1: no bank conflicts on the column reads)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::size_t r = static_cast<std::size_t>(blockIdx.y) * kTile + ty;  // output row (token)
  const std::size_t j = static_cast<std::size_t>(blockIdx.x) * kTile + tx;  // output column (feature)
  const int tid = ty * kTile + tx;                                          // 0 .. 255
  float acc = 0.0f;
  for (std::size_t k0 = 0; k0 < k; k0 += kChunk) {
    // Stage 16 × 32 values of x and of w: 512 each, two per thread; out-of-range entries are 0 and unused.
    for (int e = tid; e < kTile * kChunk; e += kTile * kTile) {
      const int row = e / kChunk, col = e % kChunk;
      const std::size_t kk = k0 + col;
      const std::size_t xr = static_cast<std::size_t>(blockIdx.y) * kTile + row;
      const std::size_t wr = static_cast<std::size_t>(blockIdx.x) * kTile + row;
      xs[row][col] = (xr < m && kk < k) ? __half2float(x[xr * k + kk]) : 0.0f;  // fp16 -> fp32 is exact
      ws[row][col] = (wr < n && kk < k) ? __half2float(w[wr * k + kk]) : 0.0f;
    }
    __syncthreads();
    const int kc = static_cast<int>(k - k0 < static_cast<std::size_t>(kChunk) ? k - k0 : kChunk);
    for (int c = 0; c < kc; ++c) {
      const float a = xs[ty][c], b = ws[tx][c];
      acc = (k0 + c == 0) ? __fmul_rn(a, b) : __fmaf_rn(a, b, acc);
    }
    __syncthreads();
  }
  if (r < m && j < n) y[r * n + j] = __float2half_rn(acc);
}

}  // namespace

cudaError_t launch_gemm_fixed_f16(const std::uint16_t* x, const std::uint16_t* w, std::uint16_t* y, std::size_t m,
                                  std::size_t n, std::size_t k, cudaStream_t stream) {
  if (m == 0 || n == 0) return cudaSuccess;
  const std::size_t gx = (n + kTile - 1) / kTile, gy = (m + kTile - 1) / kTile;
  if (gx > 0x7fffffffu || gy > 65535u) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  const dim3 block(kTile, kTile);
  gemm_fixed_f16_kernel<<<grid, block, 0, stream>>>(
      reinterpret_cast<const __half*>(x), reinterpret_cast<const __half*>(w), reinterpret_cast<__half*>(y), m, n, k);
  return cudaGetLastError();
}

}  // namespace kvconf::kernels::gpu_gemm
