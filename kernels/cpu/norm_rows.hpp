// Private to the CPU RMSNorm kernels: the two row reductions of Σx² (R1: PyTorch's block reduction; R2: fixed
// chunks with a tree inside) and the HF pipeline after it, each bit-identical to the numerics order that
// NormKernel::path() reports (tests/kernels/norm_test.cpp).
#pragma once

#include <cstddef>
#include <string>

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::kernels::cpu {

// PyTorch's launch configuration for mean(-1) over `rows` contiguous fp32 rows of length d (Reduce.cuh,
// setReduceConfig / ReduceConfig::set_block_dimension; notes/kernels.md §3): d > 128 vectorises the input
// (float4 loads: dim0 = d/4); block_width = min(last_pow2(dim0), 32), block_height = min(last_pow2(rows),
// 512 / block_width), block_width = min(last_pow2(dim0), 512 / block_height) (last_pow2 = the largest power
// of two <= n, capped at 512); the block_width threads share one row. `unsupported` is set where PyTorch
// would also split the row across the block's y threads (values_per_thread = ceil(d / block_width) >=
// 16·block_height or >= 256, with block_height > 1) or across CTAs (values_per_thread >= 256), or would see
// misaligned rows (d > 128 and d % 4 != 0): none of these is modelled.
struct R1Config {
  std::size_t threads = 32;
  bool vectorized = false;
  Reason unsupported;
};
R1Config r1_config(std::size_t rows, std::size_t d);

// The R1 order for a config: ThreadStrided{threads, vec 4 with split lanes (vectorised) or vec 1 with 4
// interleaved slots (vt0 = 4), block_first tree}.
ThreadStrided r1_order(const R1Config& c);

// Σx² of one row (fp32 squares, fp32 additions) in the R1 order. x: (d); d % 4 == 0 when vectorised.
float sum_sq_r1(const float* x, std::size_t d, const R1Config& c);

// Σx² of one row in Blocked{chunk, tree_inside}: a Pairwise tree of the squares of each chunk, the chunk sums
// added in order.
float sum_sq_r2(const float* x, std::size_t d, std::size_t chunk);

// The HF pipeline after Ŝ for one row: r = rsqrt_f32(fl32(fl32(Ŝ·fl32(1/d)) + eps)); h = fl32(x·r);
// Llama: y = fl_out(w·fl_out(h)); Gemma (p.one_plus_weight): y = fl_out(fl32(h·fl32(1 + w))).
// x, w, y: (d).
void rms_finish_row(float S, const float* x, const float* w, std::size_t d, const NormParams& p, Format out, float* y);

}  // namespace kvconf::kernels::cpu
