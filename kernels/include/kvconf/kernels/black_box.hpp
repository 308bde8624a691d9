// How a black-box kernel (libtorch, a plugin: anything that cannot state its summation order) is described to the
// bounds: formats only, reductions in any order and blocking (AnyOrder), an exp error budget for vectorised exp
// approximations. Each helper returns the path or pipeline a registry entry hands to the checks; the bounds they
// lead to hold for every order (derivation: docs/TOLERANCES.md §10).
#pragma once

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::kernels {

// PyTorch's vectorised exp_u20 (ATen/cpu/vec, "a faster version of exp with ULP=20"), used by its CPU flash
// attention: 20 ulps of fp32, each at most 2^-23 relative. tests/kernels/torch_exp_test.cpp measures it.
inline constexpr double kExpU20RelError = 20.0 * 0x1p-23;
// Its flush: exp_u20 scales by 2^(n−1) built from exponent bits, n = floor(x·log2 e + 1/2), which is 0 once
// n <= −126, i.e. for x < −125.5·ln 2 (not at ln(FLT_MIN)): it returns 0 where e^x < 2^-125.5. Absolute budget
// 2^-125 (the test measures the largest flushed e^x).
inline constexpr double kExpU20AbsError = 0x1p-125;
// PyTorch's CUDA attention kernels (FlashAttention-2 vendored, mem-efficient, cuDNN), built with fast math, compute
// p = exp2f(fl(s·scale) − m·scale·log2 e)-style arguments (notes/kernels.md §A1): the scale folded with log2 e costs
// up to 3 more roundings of the scores (charged as a scale error, kCudaScaleLog2RelError = 4u + 4u²), the
// subtraction one relative rounding of the argument, at most |x|·2^-24 absolute in log2 units for |x| <= 126 (beyond,
// the result flushes), i.e. a relative error of the exp of ln 2·126·2^-24 < 88·2^-24, and ex2.approx its own 2 ulps
// (CUDA Programming Guide's exp2f bound, taken as stated): kCudaFastExpRelError = 2^-22 + 88·2^-24, padded to
// 64 ulps of 2^-23. Results below 2^-126 flush to zero (ftz): kCudaFastExpAbsError = 2^-125. Derived, not yet
// measured on a GPU (docs/GPU.md).
inline constexpr double kCudaScaleLog2RelError = 4.0 * 0x1p-24 + 4.0 * 0x1p-48;
inline constexpr double kCudaFastExpRelError = 64.0 * 0x1p-23;
inline constexpr double kCudaFastExpAbsError = 0x1p-125;
// rsqrtf: 2 ulps (CUDA Programming Guide), relative 2·2^-23, padded by one more ulp for the mean's division.
inline constexpr double kCudaRsqrtRelError = 3.0 * 0x1p-23;
// fl32(1 / fl32(sqrt(x))): two roundings, (1 + u)/(1 − u) − 1 < 2u + 2u² with u = 2^-24 (padded).
inline constexpr double kRsqrtTwoRoundingsRelError = 0x1p-23 + 0x1p-46;

// The accumulators a black-box kernel declares (a plugin's acc and pv_acc, docs/PLUGIN.md; a Python kernel's
// accumulate= and pv_accumulate=); fp32 when it declares none. `acc`: the reductions (GEMM and RMSNorm sums,
// attention's q·k); `pv`: attention's P·V and its rescales.
struct DeclaredAcc {
  Format acc = Format::fp32;
  Format pv = Format::fp32;
  // KernelInfo::partial: the narrower of the two (the two-sided rule's naive reference accumulates in it).
  Format partial() const;
};
// An accumulator with fewer significand bits than the inputs would round them on their way in: not a reduction the
// bounds model, so a declaration of one is refused.
bool accumulator_narrower_than_inputs(Format acc, Format in);

// y = x·Wᵀ in `in`, products and sums in `acc` in any order, one rounding to `out`.
GemmPath black_box_gemm_path(Format in, Format out, Format acc = Format::fp32);
// Σx² in `acc` in any order, the rest of HF's RMSNorm in fp32, rsqrt by two roundings.
NormPath black_box_norm_path(Format in, Format acc = Format::fp32);
// ref::black_box_pipeline for the keys this call can see at most (its window or n_kv), q·k accumulated in
// `declared.acc` and P·V in `declared.pv`; the pipeline's name says which are not fp32 ("black-box + fp16 PV
// accumulator"). exp2_scale: the kernel folds the scale with log2 e and calls exp2 (PyTorch's CUDA SDPA backends, a
// plugin's KVCONF_FLAG_EXP2_SCALE, a Python kernel's exp2_scale=True), charged as kCudaScaleLog2RelError instead of
// the pipeline's own 2u + 2u².
ref::AttentionPipeline black_box_attention_pipeline(const KernelInfo& info, const AttentionCall& call,
                                                    double exp_rel_error, double exp_abs_error,
                                                    DeclaredAcc declared = {}, bool exp2_scale = false);

// The black-box probes: cpu.gemm.g1, cpu.norm.r1 and cpu.attn.a1_flash2 of each format (deterministic CPU arithmetic)
// described with each black-box path or pipeline kvconf hands out (GEMM; RMSNorm with two-rounding or CUDA rsqrt;
// attention with the exact, exp_u20 and CUDA fast-exp budgets), named probe.blackbox.<kind>.<format>[.<budget>].
// Their sweep records pin, in the golden baselines, the bound each black-box pipeline gives on fixed inputs: a bound
// whose arithmetic grows looser changes them (docs/GOLDEN.md "Black-box bounds").
class Registry;
Registry black_box_probe_registry();

}  // namespace kvconf::kernels
