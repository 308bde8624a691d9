// Bit-level model of an NVIDIA tensor-core block FMA (d = c + Σ a_i·b_i over k products), chained
// across k-blocks through c, in exact integer arithmetic. Model: Khattak & Mikaitis, "Accurate models
// of NVIDIA tensor cores" (arXiv 2512.07004) and its MATLAB code; Fasi et al., PeerJ CS 7:e330 (2021).
#pragma once

#include <cstddef>
#include <optional>
#include <span>

#include "kvconf/numerics/rounding.hpp"

namespace kvconf {

// Parameters of the block FMA (notes/numerics.md §2). The presets are those of the MATLAB models
// V100TC.m / A100TC.m / H100TC.m / H200TC.m for fp16 and bf16 inputs (V100 has fp16 only; the model is
// still defined for bf16). fp8 (k = 32, neab = −10) and tf32 inputs are not modelled here.
struct TensorCoreParams {
  int k = 16;    // products per block FMA (1 .. 4096)
  int neab = 2;  // extra alignment bits kept below the 23 fraction bits of the binary32 adder (0 .. 24)
  // Rounding of each block result into the accumulator format. Unset: the hardware behaviour,
  // round-toward-zero for an fp32 accumulator and round-to-nearest-even for an fp16 one.
  std::optional<Rounding> rounding;

  TensorCoreParams() = default;
  TensorCoreParams(int k_, int neab_, std::optional<Rounding> rounding_ = std::nullopt)
      : k(k_), neab(neab_), rounding(rounding_) {}

  static TensorCoreParams v100() { return {4, 0, std::nullopt}; }
  static TensorCoreParams a100() { return {8, 1, std::nullopt}; }
  static TensorCoreParams h100() { return {16, 2, std::nullopt}; }  // also H200 (H200TC.m), B200 (RZ variant)
};

// The rounding a block applies for accumulator format acc under params p.
Rounding tensor_core_rounding(const TensorCoreParams& p, Format acc);

// One block FMA: returns d = c + Σ_i a[i]·b[i] (a.size() == b.size() <= p.k) as the model computes it.
//   in:  format of a and b (fp16, bf16, fp8_e4m3 or fp8_e5m2); every a[i], b[i] must be a value of it.
//   acc: format of c and d (fp32 or fp16); c must be a value of it.
// Exactly (all integer arithmetic, nothing rounded before the last step):
//   1. Zero products are dropped (the model removes them before alignment).
//   2. Alignment exponent E = max( max_i (e(a_i) + e(b_i)), e(c) ), where e(x) = floor(log2|x|) clamped
//      below at the input format's emin for a_i, b_i (subnormals) and at −126 for c. It is the sum of the
//      operand exponents, not the exponent of the computed product: a product whose significand
//      product lands in [2, 4) keeps one more bit (the model's "extra bit when the largest product >= 2").
//   3. Every product and c is truncated toward zero (sign-magnitude, no sticky bit) to a multiple of
//      2^(E − 23 − neab).
//   4. The truncated terms are added exactly (carries kept; no intermediate normalisation).
//   5. The sum is normalised once and rounded to acc with tensor_core_rounding(p, acc), subnormals
//      kept; a result of magnitude >= 2^(emax+1) becomes ±inf (as in the model), a zero result is +0.
// NaN or infinite operands: the result is the IEEE value of Σ a_i·b_i + c (NaN wins; +inf with −inf is NaN).
// Throws std::invalid_argument on bad parameters, sizes or operands that are not values of their format.
double tensor_core_block_fma(const TensorCoreParams& p, Format in, Format acc, std::span<const double> a,
                             std::span<const double> b, double c);

// Σ_i a[i]·b[i] + c as a chain of block FMAs over consecutive blocks of k elements, in index order
// (elements [0, k), [k, 2k), ...; the last block may be shorter, which equals zero padding since zero
// products are dropped): c ← block(a[jk..], b[jk..], c). Result in acc (c in acc, default 0).
double tensor_core_dot(const TensorCoreParams& p, Format in, Format acc, std::span<const double> a,
                       std::span<const double> b, double c = 0.0);

}  // namespace kvconf
