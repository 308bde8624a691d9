// A-priori rounding-error bounds for the accumulation orders of numerics/accumulate.hpp, the Higham–Mary
// probabilistic bound, and a per-element attention bound. Every tolerance in kvconf comes from here;
// the derivations, with sources, are in docs/TOLERANCES.md.
//
// Conventions shared by every function:
//  - A bound is an absolute error bound |computed − exact|, rigorous (not first order), valid when no
//    intermediate overflows; underflow is included (absolute terms η).
//  - Rounding model per operation into format F: fl(z) = z(1+δ) + η, |δ| <= u_F (round to nearest) or
//    2u_F (toward zero / up / down / to odd), |η| <= underflow_unit(F) (see below).
//  - Where the deterministic constant is vacuous (γ_m with m·u >= 1) the bound is +inf, never a finite
//    wrong number.
//  - Formulas are evaluated in binary64 round-to-nearest on non-negative quantities with no
//    cancellation (every subtraction is exact or avoided); each returned number is multiplied by
//    kSafety = 1 + 2^-20, which covers the relative rounding error of up to 2^31 such operations.
//    Callers must pass condition quantities (Σ|x_i y_i|, ...) that are upper bounds (round them up).
#pragma once

#include <cstddef>
#include <limits>
#include <optional>

#include "kvconf/numerics/accumulate.hpp"

namespace kvconf::ref {

inline constexpr double kUnknown = std::numeric_limits<double>::infinity();
inline constexpr double kSafety = 1.0 + 0x1p-20;

// |computed − exact| <= rel·C + abs, C the condition quantity (Σ|x_i·y_i| for a dot product, Σ|x_i| for a sum).
struct ErrorTerms {
  double rel = 0.0;
  double abs = 0.0;
  // rel·C + abs, rounded up (kSafety); +inf if rel or abs is +inf.
  double at(double condition) const;
};

// Per-operation constants of rounding into f with options o.
//   unit_roundoff: u = 2^-p for nearest_even, 2u for every other mode (|δ| < 1 ulp).
//   underflow_unit: η = half the subnormal spacing 2^(emin−p+1) for nearest_even, the full spacing for
//   other modes, and 2^emin (the smallest normal) when o.ftz flushes subnormal results.
double unit_roundoff(Format f, RoundOptions o = {});
double underflow_unit(Format f, RoundOptions o = {});

// γ_m(u) = m·u / (1 − m·u) (Higham, ASNA Lemma 3.1); +inf when m·u >= 1; 0 for m = 0. Not safety-scaled
// (exact operands give a correctly rounded quotient; the bound functions below scale their results).
double gamma(std::size_t m, double u);

// Largest number of roundings in the accumulator format that any single term goes through, for n terms
// of a dot product (dot = true) or a sum, in the orders that are chains of roundings (every order but the
// tensor-core one and split-K with tensor-core slices, for which it throws std::invalid_argument). For
// split-K with slices rounded to the output format, the out-format roundings are not counted here; for
// ThreadStrided with a combine format other than acc, only the acc roundings are (see below).
std::size_t roundings_per_term(const AccumSpec& spec, const Order& order, std::size_t n, bool dot = true);

// ThreadStrided: the largest number of roundings of one term, split by format (docs/TOLERANCES.md §1).
//   acc:     leaf + (longest accumulator chain − 1) — thread 0, slot 0: ceil(ceil(G/T)/interleave) visits,
//            times vec terms per visit without split_lanes (G = ceil(n/vec) groups);
//   combine: (accumulators of thread 0 that take a term − 1) + tree levels (warp_first: log2 min(T,32) +
//            ceil(log2(T/32)) for T > 32, the +0 padding being exact; block_first: log2 T), + 1 when the
//            combine format does not contain acc (the conversion rounds).
// Throws std::invalid_argument for thread counts ThreadStrided does not allow.
struct ThreadStridedRoundings {
  std::size_t acc = 0;
  std::size_t combine = 0;
};
ThreadStridedRoundings thread_strided_roundings(const AccumSpec& spec, const ThreadStrided& order, std::size_t n,
                                                bool dot = true);

// Deterministic bound of kvconf::dot(spec, order, x, y) with n = x.size(), including the final rounding to
// spec.out:  |dot − x·y| <= rel·Σ|x_i y_i| + abs.
//  - Sequential / Pairwise / Blocked / SplitK / ThreadStrided: γ of the number of roundings per term
//    (products exact in acc when 2·p_in <= p_acc, so not counted), composed across the acc, combine and
//    out formats.
//  - TensorCore and SplitK with tensor-core slices: the block-FMA recurrence of docs/TOLERANCES.md §4
//    (truncation to 2^(E−23−neab), RZ or RNE per block, c in the alignment, chained).
// max_abs_operand (max_i max(|x_i|, |y_i|)) only enters the tensor-core bound, through subnormal inputs
// (whose alignment exponent is clamped at emin); kUnknown means the input format's largest finite value.
ErrorTerms dot_error_terms(const AccumSpec& spec, const Order& order, std::size_t n, double max_abs_operand = kUnknown);
double dot_error_bound(const AccumSpec& spec, const Order& order, std::size_t n, double sum_abs,
                       double max_abs_operand = kUnknown);

// The same for kvconf::sum(spec, order, x):  |sum − Σx_i| <= rel·Σ|x_i| + abs.
ErrorTerms sum_error_terms(const AccumSpec& spec, const Order& order, std::size_t n, double max_abs_operand = kUnknown);
double sum_error_bound(const AccumSpec& spec, const Order& order, std::size_t n, double sum_abs,
                       double max_abs_operand = kUnknown);

// --- Higham–Mary probabilistic bound (SISC 41(5):A2815, 2019) -------------------------------------
// Model: the rounding errors δ of the accumulator are independent, mean-zero random variables with
// |δ| <= u. Then for each term, |θ_m| <= γ̃_m(λ) = exp(λ√m·u + m·u²/(1−u)) − 1 with probability at least
// 1 − 2·exp(−λ²(1−u)²/2); a union bound over n terms gives failure probability <= 2n·exp(−λ²(1−u)²/2).
// Valid for round-to-nearest only (the mean-zero model fails for directed rounding and tensor cores).
// λ with 2n·exp(−λ²(1−u)²/2) = failure_probability, rounded up.
double higham_mary_lambda(std::size_t n, double failure_probability, double u);
double higham_mary_gamma(std::size_t m, double lambda, double u);  // γ̃_m(λ), +inf if not finite
// The dot bound with γ_m(u_acc) replaced by γ̃_m(λ) (λ for n terms and failure_probability); the output
// roundings (final rounding, split-K slices rounded to out) and underflow terms stay deterministic.
// Throws std::invalid_argument for tensor-core orders, non-nearest rounding, or a probability not in (0, 1).
ErrorTerms probabilistic_dot_error_terms(const AccumSpec& spec, const Order& order, std::size_t n,
                                         double failure_probability);
double probabilistic_dot_error_bound(const AccumSpec& spec, const Order& order, std::size_t n, double sum_abs,
                                     double failure_probability);

// --- Attention (docs/TOLERANCES.md §6) -------------------------------------------------------------
// One score ŝ = fl_score(τ̂·d̂), d̂ the computed q·k with |d̂ − q·k| <= qk.at(sum_abs_qk).
struct ScoreErrorInputs {
  ErrorTerms qk;               // error terms of the q·k accumulation (dot_error_terms)
  double sum_abs_qk = 0.0;     // Σ_i |q_i k_i|
  double abs_qk = 0.0;         // |q·k| or any upper bound of it (sum_abs_qk is always valid)
  double tau = 1.0;            // the exact scale, e.g. 1/sqrt(d), or an upper bound of it (1/sqrt(128) is irrational)
  double tau_rel_error = 0.0;  // |τ̂ − τ| <= tau_rel_error·τ for the τ̂ actually used (0: exact)
  Format score = Format::fp32;
  RoundOptions round{};
};
// Bound on |ŝ − τ·q·k|. When τ is an exact power of two the product rounding is exact (η only).
double score_error_bound(const ScoreErrorInputs& in);

// Softmax p = softmax(ŝ) computed as m̂ = max ŝ (exact), d_j = fl(ŝ_j − m̂), ê_j = fl(exp(d_j)),
// l̂ = Σ ê_j (in the order whose error terms are row_sum), and either p̂_j = fl(ê_j / l̂) (normalised
// before PV) or ê_j fed to PV with the output divided by l̂ afterwards (FlashAttention-2).
struct SoftmaxErrorInputs {
  std::size_t n = 0;          // keys
  double score_range = 0.0;   // R >= max_j (m̂ − ŝ_j), e.g. (max_j s_j − min_j s_j) + 2·Δs
  Format fmt = Format::fp32;  // format of the subtraction, exp, row sum and division
  RoundOptions round{};
  double exp_rel_error = 0.0;  // |ê − exp(d)| <= exp_rel_error·exp(d) + underflow_unit(fmt), rounding to fmt included
  ErrorTerms row_sum;          // sum_error_terms of the row-sum order (condition Σ ê_j)
  bool normalize_before_pv = true;
};
// The computed weights w_j that enter the PV product, expressed against p'_j = softmax(ŝ)_j, satisfy
//   w_j / l_scale = p'_j (1+ε_j)/(1+λ) + ζ_j,  |ε_j| <= weight_rel, |λ| <= norm_rel, |ζ_j| <= weight_abs,
// where l_scale = 1 when normalised before PV and l̂ otherwise; λ is common to all j.
struct SoftmaxErrors {
  double weight_rel = 0.0;
  double weight_abs = 0.0;
  double norm_rel = 0.0;
};
SoftmaxErrors softmax_errors(const SoftmaxErrorInputs& in);

// One attention output element o = Σ_j p_j v_j (p = softmax of the exact scores s).
struct AttentionErrorInputs {
  // From the exact attention (oracle), all rounded up:
  double delta_s = 0.0;       // Δs >= max_j |ŝ_j − s_j|
  double spread = 0.0;        // Σ_j p_j |v_j − o|
  double weighted_abs = 0.0;  // Σ_j p_j |v_j|
  double abs_o = 0.0;         // |o|
  double sum_abs_v = 0.0;     // Σ_j |v_j| (carries the absolute (underflow) weight errors)
  // The pipeline:
  SoftmaxErrors softmax;
  std::optional<Format> p_cast;  // weights rounded to this format before the PV product (none: no cast)
  RoundOptions p_round{};
  ErrorTerms pv;                 // PV accumulation over the weights fed to it (no final rounding in it)
  std::optional<Format> divide;  // FlashAttention-2: o = fl_divide(acc / l̂); none when normalised before PV
  RoundOptions divide_round{};
  std::optional<Format> out;  // final rounding of o (none: the PV/divide result is the output)
  RoundOptions out_round{};
};
// |ô − o| <= (1+u_d)(1+u_o)·D + (u_d + u_o + u_d·u_o)·|o| + η_d(1+u_o) + η_o, with
//   D = expm1(2Δs)·spread + (κ·W' + Λ·O')/(1−Λ) + ζ·Σ|v| + pv.rel·M + pv.abs/(1−Λ),
//   W' = e^{2Δs}·weighted_abs, O' = |o| + expm1(2Δs)·spread, κ = (1+ε_w)(1+u_P) − 1,
//   ζ = weight_abs·(1+u_P) + η_P/(1−Λ), M = (1+κ)·W'/(1−Λ) + ζ·Σ|v|.
// First order: 2Δs·Σp|v−o| + (ε_w + u_P + A)·Σp|v| + (Λ + u_d + u_o)·|o| (notes/numerics.md §1.5, with
// the row-sum error moved from the Σp|v| term to the |o| term). +inf when Λ >= 1.
double attention_error_bound(const AttentionErrorInputs& in);

}  // namespace kvconf::ref
