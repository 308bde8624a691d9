// Private to the CPU GEMM kernels: the fast inner loops, each bit-identical to one numerics order
// (tests/kernels/gemm_test.cpp). Tensors are row-major spans of floats holding format values.
#pragma once

#include <cstddef>
#include <span>

#include "kvconf/numerics/tensor_core.hpp"

namespace kvconf::kernels::cpu {

// Accumulator of a sequential chain: fp32 (leaf fl32(x·w), then fused fp32 FMAs: FFMA) or fp16 (leaf
// fl16(x·w), then correctly rounded fp16 FMAs: HFMA / cuBLAS COMPUTE_16F). fp16 chains need fp16 inputs.
enum class ChainAcc { fp32, fp16 };

// out[r·n + j] = the sequential chain over k ∈ [k0, k1) of x[r·k + kk]·w[j·k + kk] in `acc`
// (numerics::dot with Order Sequential on that slice, before any output rounding); +0 for an empty range.
// x: (m, k), w: (n, k), out: (m, n). W is packed into 8-column panels per call; 8 lanes × 4 panels × 2 rows
// of independent chains run together, each output keeping its own k order.
void chain_gemm(ChainAcc acc, std::span<const float> x, std::span<const float> w, std::size_t m, std::size_t n,
                std::size_t k, std::size_t k0, std::size_t k1, std::span<float> out);

// llama.cpp's mul_mat_vec_f thread count for a row of k values: the first T of 32, 64, 96, ..., 256 that
// minimises the iterations ceil(k / (2T)) (mmvf.cu, launch_mul_mat_vec_f_cuda).
std::size_t mmvf_threads(std::size_t k);

// y[j] = x · w_j by numerics' ThreadStrided{T, vec = 2, warp_first} order, result in fp32 (before the output
// rounding): half2 = false: one fp32 FFMA chain per thread (split_lanes = false, acc fp32);
// half2 = true: two fp16 HFMA lane chains per thread (split_lanes = true, acc fp16, combine fp32).
// x: (k), w: (n, k), y: (n). T must be a multiple of 32 (llama.cpp's block sizes).
void gemv_thread_strided(bool half2, std::size_t T, std::span<const float> x, std::span<const float> w, std::size_t n,
                         std::size_t k, std::span<float> y);

// out[r·n + j] = numerics::dot(TensorCore{p}) with in = fp16, acc = fp32 before the output rounding: the
// tensor-core block-FMA model (tensor_core.hpp) with integer significands, chained over blocks of p.k.
// x: (m, k), w: (n, k), out: (m, n). Requires p.rounding unset (RZ blocks) and p.neab <= 8.
void tensor_core_gemm_f16(const TensorCoreParams& p, std::span<const float> x, std::span<const float> w, std::size_t m,
                          std::size_t n, std::size_t k, std::span<float> out);

}  // namespace kvconf::kernels::cpu
