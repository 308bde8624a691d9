// RMSNorm: the oracle (y = x·w / sqrt(mean(x²) + eps), certified and correctly rounded) and the rigorous
// per-element error bound of the HF pipeline the CPU norm kernels emulate (docs/TOLERANCES.md §9).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kvconf/numerics/format.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::ref {

// ---------------------------------------------------------------------------------------------
// Oracle.

struct RmsNormResult {
  std::vector<double> y;                // (rows, d) correctly rounded to options.out
  std::vector<double> approx;           // (rows, d) the exact value to within one ulp of double
  std::vector<std::uint8_t> certified;  // (rows, d) 1 unless flagged (OracleOptions::throw_if_uncertified)
  std::vector<double> sum_sq;           // (rows) Σ_i x_i² (exact), rounded up
  std::vector<double> inv_rms;          // (rows) ρ = 1/sqrt(Σx²/d + eps), nearest double
  int precision_bits = 0;               // largest working precision the Ziv loop needed
};

// x: (rows, d) and w: (d), values of `in`; eps >= 0 is the exact value the kernel adds (a float).
//   Llama (one_plus_weight = false): y_ri = x_ri · w_i · ρ_r;  Gemma (true): y_ri = x_ri · (1 + w_i) · ρ_r,
//   ρ_r = 1 / sqrt(Σ_i x_ri² / d + eps).
// Σx² is exact (oracle dot); d·ρ and the products are evaluated in MPFR with directed rounding at
// precisions 64, 128, ... <= options.max_prec until both ends of the bracket round to the same value.
// Throws std::invalid_argument on bad shapes or values, eps < 0 or not finite, or a row with
// Σx² = 0 and eps = 0 (ρ infinite).
RmsNormResult rms_norm(std::span<const double> x, std::span<const double> w, std::size_t rows, std::size_t d,
                       double eps, bool one_plus_weight, Format in, const OracleOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Bound of the kernels' pipeline (HF LlamaRMSNorm / Gemma2RMSNorm, notes/kernels.md §3):
//   Ŝ = Σx² by the kernel's reduction (error terms `sum_terms`, condition Σx²);
//   f̂ = fl32(1/d);  V̂ = fl32(Ŝ·f̂)  (PyTorch mean = sum × factor);  Ŵ = fl32(V̂ + eps);
//   r̂ = rsqrt(Ŵ) with relative error <= rsqrt_rel_error;  ĥ_i = fl32(x_i·r̂);
//   Llama: ŷ_i = fl_out(w_i · fl_out(ĥ_i))  (the second rounding is skipped when out ⊇ fp32);
//   Gemma: ŷ_i = fl_out(fl32(ĥ_i · fl32(1 + w_i))).
// All roundings nearest-even without ftz.

// Relative error of fl32(1/sqrt(double(w))) (sqrt and division in binary64, then one fp32 rounding):
// (1 + 2^-24)(1 + 2^-53)² − 1 < 2^-24 + 2^-51. The CPU kernels' rsqrt_f32 (kernels/fast_fp.hpp).
inline constexpr double kRsqrtViaDoubleRelError = 0x1p-24 + 0x1p-51;

struct RmsNormErrorInputs {
  std::size_t d = 1;
  double sum_sq = 0.0;   // Σx² of the row (exact), rounded up (RmsNormResult::sum_sq)
  double eps = 0.0;      // the eps the kernel adds (exact float value)
  ErrorTerms sum_terms;  // |Ŝ − Σx²| <= sum_terms.at(Σx²): dot_error_terms(path.spec, path.order, d)
  double rsqrt_rel_error = kRsqrtViaDoubleRelError;
  bool one_plus_weight = false;
  Format out = Format::fp16;
};

// |ŷ_i − y_i| <= rel·|y_i| + abs_w·|w'_i| + abs, w'_i = w_i (Llama) or 1 + w_i (Gemma).
struct RmsNormErrorTerms {
  double rel = 0.0;
  double abs_w = 0.0;
  double abs = 0.0;
  // The bound for one element, rounded up (kSafety); +inf if any term is.
  double at(double abs_y, double abs_weight_factor) const;
};

// Terms for one row. +inf when the relative perturbation of Ŵ reaches 1 (vacuous).
RmsNormErrorTerms rms_norm_error_terms(const RmsNormErrorInputs& in);
// rms_norm_error_terms(in).at(abs_y, abs_weight_factor).
double rms_norm_error_bound(const RmsNormErrorInputs& in, double abs_y, double abs_weight_factor);

}  // namespace kvconf::ref
