// The RMSNorm error bound (norm.hpp). Derivation: docs/TOLERANCES.md §9. Every formula works on
// non-negative doubles without cancellation ((1+a)(1+b) − 1 is formed as a + b + ab, (1−T)^(−1/2) − 1 as
// expm1(−log1p(−T)/2)); results are scaled by kSafety.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <stdexcept>

#include "kvconf/reference/norm.hpp"

namespace kvconf::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Π(1 + e_k) − 1 for non-negative e_k, without cancellation.
double grow(std::initializer_list<double> es) {
  double g = 0.0;
  for (const double e : es) g = g + e + g * e;
  return g;
}

// out ⊇ fp32: fl_out is the identity on fp32 values (fp32 itself, fp64).
bool holds_fp32(Format f) { return f == Format::fp32 || f == Format::fp64; }

}  // namespace

double RmsNormErrorTerms::at(double abs_y, double abs_weight_factor) const {
  if (std::isinf(rel) || std::isinf(abs_w) || std::isinf(abs) || std::isinf(abs_y) || std::isinf(abs_weight_factor))
    return kInf;
  if (!(abs_y >= 0.0) || !(abs_weight_factor >= 0.0))
    throw std::invalid_argument("kvconf::ref::RmsNormErrorTerms::at: |y| and |w'| must be >= 0");
  return (rel * abs_y + abs_w * abs_weight_factor + abs) * kSafety;
}

RmsNormErrorTerms rms_norm_error_terms(const RmsNormErrorInputs& in) {
  if (in.d < 1) throw std::invalid_argument("kvconf::ref::rms_norm_error_terms: d must be >= 1");
  if (!(in.eps >= 0.0) || !std::isfinite(in.eps) || !(in.sum_sq >= 0.0) || !(in.rsqrt_rel_error >= 0.0))
    throw std::invalid_argument("kvconf::ref::rms_norm_error_terms: eps, sum_sq and rsqrt_rel_error must be >= 0");
  const RmsNormErrorTerms vacuous{kInf, kInf, kInf};
  if (std::isinf(in.sum_terms.rel) || std::isinf(in.sum_terms.abs) || std::isinf(in.sum_sq)) return vacuous;

  const double u = unit_roundoff(Format::fp32);     // 2^-24
  const double eta = underflow_unit(Format::fp32);  // 2^-150
  const double d = static_cast<double>(in.d);
  // f̂ = fl32(1/d) is exact when d is a power of two (d < 2^126).
  const bool d_pow2 = (in.d & (in.d - 1)) == 0;
  const double u_f = d_pow2 ? 0.0 : u;

  // |V̂ − V| <= c1·V + c2 with V = S/d (the reduction error, f̂, and the rounding of Ŝ·f̂).
  const double c1 = grow({in.sum_terms.rel, u_f, u});
  const double c2 = in.sum_terms.abs / d * (1.0 + u_f) * (1.0 + u) + eta;
  // W = V + eps >= max(eps, S/d); sum_sq is the exact S rounded up, so scale it down past its rounding.
  const double w_lo = std::max(in.eps, in.sum_sq * (1.0 - 0x1p-50) / d * (1.0 - 0x1p-50));
  if (!(w_lo > 0.0)) return vacuous;
  // Ŵ = fl32(V̂ + eps) = W(1 + τ), |τ| <= T = u + (1 + u)(c1 + c2/W)  (an addition has no underflow error).
  const double T = u + (1.0 + u) * (c1 + c2 / w_lo);
  if (!(T < 1.0)) return vacuous;
  // r̂ = ρ(1 + κ), |κ| <= K = (1 + ε_r)(1 − T)^(−1/2) − 1 (the worst of the two sides, §9).
  const double q = std::expm1(-0.5 * std::log1p(-T)) * (1.0 + 0x1p-40);
  const double K = grow({in.rsqrt_rel_error, q});

  const bool out32 = holds_fp32(in.out);
  const double u_o = out32 ? 0.0 : unit_roundoff(in.out);
  const double eta_o = out32 ? 0.0 : underflow_unit(in.out);
  RmsNormErrorTerms t;
  if (!in.one_plus_weight) {
    if (out32) {
      // ŷ = fl32(w · ĥ), ĥ = fl32(x·r̂).
      t.rel = grow({K, u, u});
      t.abs_w = (1.0 + u) * eta;
      t.abs = eta;
    } else {
      // ŷ = fl_o(w · fl_o(ĥ)).
      t.rel = grow({K, u, u_o, u_o});
      t.abs_w = (1.0 + u_o) * (eta * (1.0 + u_o) + eta_o);
      t.abs = eta_o;
    }
  } else {
    // ŷ = fl_o(fl32(ĥ · fl32(1 + w))); fl32(1 + w) has no underflow error.
    t.rel = grow({K, u, u, u, u_o});
    t.abs_w = (1.0 + u) * (1.0 + u) * (1.0 + u_o) * eta;
    t.abs = eta * (1.0 + u_o) + eta_o;
  }
  return t;
}

double rms_norm_error_bound(const RmsNormErrorInputs& in, double abs_y, double abs_weight_factor) {
  return rms_norm_error_terms(in).at(abs_y, abs_weight_factor);
}

}  // namespace kvconf::ref
