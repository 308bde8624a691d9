// Score, softmax and per-element attention error bounds (bounds.hpp; derivation: docs/TOLERANCES.md §6).
// All quantities are non-negative; the only subtraction, 1 − Λ in a denominator, is rounded down
// explicitly (one_minus_lower); every result is scaled by kSafety.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kvconf/reference/bounds.hpp"

namespace kvconf::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double safe(double x) { return std::isinf(x) ? x : x * kSafety; }

// A lower bound of 1 − x for x in [0, 1): the rounded difference, nudged down by a relative 2^-50
// (1 − x is computed with one rounding; its relative error is at most 2^-53 unless it cancels to below
// 2^-3, where it is exact by Sterbenz's lemma).
double one_minus_lower(double x) { return (1.0 - x) * (1.0 - 0x1p-50); }

void check_nonneg(double v, const char* what) {
  if (std::isnan(v) || v < 0.0)
    throw std::invalid_argument(std::string("kvconf::ref attention bounds: ") + what + " must be >= 0");
}

}  // namespace

double score_error_bound(const ScoreErrorInputs& in) {
  check_nonneg(in.sum_abs_qk, "sum_abs_qk");
  check_nonneg(in.abs_qk, "abs_qk");
  check_nonneg(in.tau_rel_error, "tau_rel_error");
  if (!(in.tau > 0.0)) throw std::invalid_argument("kvconf::ref::score_error_bound: tau must be > 0");
  const double B = in.qk.at(in.sum_abs_qk);  // |d̂ − d|
  if (std::isinf(B)) return kInf;
  const double Dd = in.abs_qk + B;  // >= |d̂|
  int e = 0;
  const bool pow2 = std::frexp(in.tau, &e) == 0.5;
  const bool exact_scale = pow2 && in.tau_rel_error == 0.0;
  const double u = exact_scale ? 0.0 : unit_roundoff(in.score, in.round);
  const double eta = underflow_unit(in.score, in.round);
  // ŝ − τd = (fl(τ̂d̂) − τ̂d̂) + (τ̂ − τ)d̂ + τ(d̂ − d)
  const double tau_max = in.tau * (1.0 + in.tau_rel_error);
  return safe(u * tau_max * Dd + eta + in.tau * in.tau_rel_error * Dd + in.tau * B);
}

SoftmaxErrors softmax_errors(const SoftmaxErrorInputs& in) {
  check_nonneg(in.score_range, "score_range");
  check_nonneg(in.exp_rel_error, "exp_rel_error");
  if (std::isinf(in.row_sum.rel) || std::isinf(in.row_sum.abs) || std::isinf(in.score_range)) return {kInf, kInf, kInf};
  const double u = unit_roundoff(in.fmt, in.round);
  const double eta = underflow_unit(in.fmt, in.round);
  const double n = static_cast<double>(in.n);
  // ê_j = e_j(1+φ_j) + ζ_j with e_j = exp(ŝ_j − m̂): the subtraction moves the argument by <= u·R.
  const double omega = u * in.score_range;
  const double phi = std::expm1(omega) * (1.0 + in.exp_rel_error) + in.exp_rel_error;
  // l̂ = L(1+λ), L = Σ e_j >= 1 (the maximum contributes exp(0) = 1).
  const double Lambda = phi + in.row_sum.rel * (1.0 + phi) + n * eta * (1.0 + in.row_sum.rel) + in.row_sum.abs;
  if (!(Lambda < 1.0)) return {kInf, kInf, kInf};
  const double one_minus = one_minus_lower(Lambda);
  SoftmaxErrors r;
  r.norm_rel = safe(Lambda);
  if (in.normalize_before_pv) {
    r.weight_rel = safe(phi + u + phi * u);  // (1+φ)(1+δ_div) − 1
    r.weight_abs = safe(eta * (1.0 + u) / one_minus + eta);
  } else {
    r.weight_rel = safe(phi);
    r.weight_abs = safe(eta / one_minus);
  }
  return r;
}

double attention_error_bound(const AttentionErrorInputs& in) {
  check_nonneg(in.delta_s, "delta_s");
  check_nonneg(in.spread, "spread");
  check_nonneg(in.weighted_abs, "weighted_abs");
  check_nonneg(in.abs_o, "abs_o");
  check_nonneg(in.sum_abs_v, "sum_abs_v");
  const SoftmaxErrors& sm = in.softmax;
  for (double v : {in.delta_s, in.spread, in.weighted_abs, in.abs_o, in.sum_abs_v, sm.weight_rel, sm.weight_abs,
                   sm.norm_rel, in.pv.rel, in.pv.abs})
    if (std::isinf(v)) return kInf;
  const double Lambda = sm.norm_rel;
  if (!(Lambda < 1.0)) return kInf;
  const double one_minus = one_minus_lower(Lambda);

  const double uP = in.p_cast ? unit_roundoff(*in.p_cast, in.p_round) : 0.0;
  const double etaP = in.p_cast ? underflow_unit(*in.p_cast, in.p_round) : 0.0;
  const double ud = in.divide ? unit_roundoff(*in.divide, in.divide_round) : 0.0;
  const double etad = in.divide ? underflow_unit(*in.divide, in.divide_round) : 0.0;
  const double uo = in.out ? unit_roundoff(*in.out, in.out_round) : 0.0;
  const double etao = in.out ? underflow_unit(*in.out, in.out_round) : 0.0;

  // Exact softmax of the computed scores vs of the exact scores: p'_j/p_j ∈ [e^{−2Δs}, e^{2Δs}].
  const double E2 = std::expm1(2.0 * in.delta_s);
  if (std::isinf(E2)) return kInf;
  const double D1 = E2 * in.spread;                // |o' − o|
  const double Wp = (1.0 + E2) * in.weighted_abs;  // Σ p'_j |v_j|
  const double Op = in.abs_o + D1;                 // |o'|
  const double kappa = sm.weight_rel + uP + sm.weight_rel * uP;
  const double zeta = sm.weight_abs * (1.0 + uP) + etaP / one_minus;
  const double Dw = (kappa * Wp + Lambda * Op) / one_minus + zeta * in.sum_abs_v;  // |Σ w̃_j v_j − o'|
  const double M = (1.0 + kappa) * Wp / one_minus + zeta * in.sum_abs_v;           // Σ |w̃_j v_j|
  const double Dacc = in.pv.rel * M + in.pv.abs / one_minus;
  const double D = D1 + Dw + Dacc;
  const double cf = (1.0 + ud) * (1.0 + uo);
  const double bound = cf * D + (ud + uo + ud * uo) * in.abs_o + etad * (1.0 + uo) + etao;
  return std::isfinite(bound) ? safe(bound) : kInf;
}

}  // namespace kvconf::ref
