// Oracle: RMSNorm of rows (norm.hpp), each element correctly rounded and certified.
//
// Per row: S = Σ x_i² exactly (the oracle's dot) and W = S/d + eps as an exact rational (GMP).
//  - W a square of rationals, W = (a/b)² (e.g. constant rows with eps = 0, or W = 4): ρ = b/a and
//    y_i = (t_i·b)/a is rational; it is bracketed by MPFR's directed divisions of two exact numbers.
//  - otherwise ρ = W^(−1/2) is irrational, bracketed as
//      W ∈ [RD(RD(S/d) + eps), RU(RU(S/d) + eps)],  ρ ∈ [RD(ρ(W_hi)), RU(ρ(W_lo))],
//      y_i = t_i·ρ ∈ [RD(t·ρ_lo), RU(t·ρ_hi)] for t > 0 (ends swapped for t < 0),
// with t_i = x_i·w_i or x_i·(1 + w_i) formed exactly, at precisions P = 64, 128, ... <= max_prec, until
// both ends round to the same value (an end is open, i.e. strictly inside, when any rounding on its way was
// inexact). Termination: an irrational y (t ≠ 0, ρ irrational) is no rounding boundary of any format; a
// rational y is either exact at some precision (the bracket closes on it) or not dyadic, hence no boundary
// either. t = 0 gives +0.
#include <gmp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/norm.hpp"
#include "kvconf/reference/oracle_detail.hpp"

namespace kvconf::ref {

RmsNormResult rms_norm(std::span<const double> x, std::span<const double> w, std::size_t rows, std::size_t d,
                       double eps, bool one_plus_weight, Format in, const OracleOptions& o) {
  static constexpr char kFn[] = "kvconf::ref::rms_norm";
  if (d < 1) throw std::invalid_argument(std::string(kFn) + ": d must be >= 1");
  detail::check_size(kFn, "x", x.size(), detail::checked_mul(kFn, rows, d), "rows*d");
  detail::check_size(kFn, "w", w.size(), d, "d");
  detail::check_values(kFn, "x", x, in);
  detail::check_values(kFn, "w", w, in);
  if (!(eps >= 0.0) || !std::isfinite(eps))
    throw std::invalid_argument(std::string(kFn) + ": eps = " + std::to_string(eps) + " must be finite and >= 0");

  // c_i = w_i or 1 + w_i, exact (at most 150 significant bits for fp32 weights).
  std::vector<Mpfr> c;
  c.reserve(d);
  for (std::size_t i = 0; i < d; ++i) {
    c.emplace_back(256);
    mpfr_set_d(c.back().get(), w[i], MPFR_RNDN);
    if (one_plus_weight && mpfr_add_ui(c.back().get(), c.back().get(), 1, MPFR_RNDN) != 0)
      throw std::logic_error(std::string(kFn) + ": 1 + w was not exact");
  }

  RmsNormResult r;
  r.y.assign(rows * d, 0.0);
  r.approx.assign(rows * d, 0.0);
  r.certified.assign(rows * d, 1);
  r.sum_sq.assign(rows, 0.0);
  r.inv_rms.assign(rows, 0.0);
  const mpfr_prec_t top = std::max<mpfr_prec_t>(o.max_prec, 64);
  const auto dd = static_cast<unsigned long>(d);
  std::vector<Mpfr> t;
  t.reserve(d);
  for (std::size_t i = 0; i < d; ++i) t.emplace_back(320);  // 53 + 256 bits: x·c is exact

  for (std::size_t row = 0; row < rows; ++row) {
    const std::span<const double> xr = x.subspan(row * d, d);
    const DotResult S = dot(xr, xr, in);  // exact; abs_sum = Σx² rounded up
    r.sum_sq[row] = S.abs_sum;
    if (mpfr_zero_p(S.exact.get()) && eps == 0.0)
      throw std::invalid_argument(std::string(kFn) + ": row " + std::to_string(row) +
                                  " has sum of squares 0 and eps = 0 (1/rms is infinite)");
    // W = S/d + eps exactly; a rational square gives the exact path.
    mpq_t Wq, eq;
    mpq_init(Wq);
    mpq_init(eq);
    mpfr_get_q(Wq, S.exact.get());
    mpz_mul_ui(mpq_denref(Wq), mpq_denref(Wq), dd);
    mpq_canonicalize(Wq);
    mpq_set_d(eq, eps);
    mpq_add(Wq, Wq, eq);
    const bool square = mpz_perfect_square_p(mpq_numref(Wq)) != 0 && mpz_perfect_square_p(mpq_denref(Wq)) != 0;
    mpz_t a, b;
    mpz_init(a);
    mpz_init(b);
    if (square) {
      mpz_sqrt(a, mpq_numref(Wq));  // ρ = b/a
      mpz_sqrt(b, mpq_denref(Wq));
    }
    const auto bits = [](const mpz_t z) {
      return static_cast<mpfr_prec_t>(std::max<std::size_t>(mpz_sizeinbase(z, 2), 2));
    };
    Mpfr A(square ? bits(a) : 2), B(square ? bits(b) : 2);
    if (square) {
      mpfr_set_z(A.get(), a, MPFR_RNDN);  // exact
      mpfr_set_z(B.get(), b, MPFR_RNDN);
    }
    mpz_clear(a);
    mpz_clear(b);
    mpq_clear(Wq);
    mpq_clear(eq);
    Mpfr tb(square ? 320 + mpfr_get_prec(B.get()) : 2);

    std::vector<std::size_t> pending;
    for (std::size_t i = 0; i < d; ++i) {
      mpfr_set_d(t[i].get(), xr[i], MPFR_RNDN);
      mpfr_mul(t[i].get(), t[i].get(), c[i].get(), MPFR_RNDN);  // exact
      if (mpfr_zero_p(t[i].get())) {
        r.y[row * d + i] = round_to(o.out, 0.0, o.round);
      } else {
        pending.push_back(i);
      }
    }
    bool first = true;
    std::vector<double> best(d, 0.0);
    for (mpfr_prec_t P = 64; !pending.empty() && P <= top; P *= 2) {
      Mpfr wlo(P), whi(P), rlo(P), rhi(P), ylo(P + 8), yhi(P + 8);
      bool wlo_open = mpfr_div_ui(wlo.get(), S.exact.get(), dd, MPFR_RNDD) != 0;
      wlo_open = (mpfr_add_d(wlo.get(), wlo.get(), eps, MPFR_RNDD) != 0) || wlo_open;
      bool whi_open = mpfr_div_ui(whi.get(), S.exact.get(), dd, MPFR_RNDU) != 0;
      whi_open = (mpfr_add_d(whi.get(), whi.get(), eps, MPFR_RNDU) != 0) || whi_open;
      // ρ is decreasing in W: its lower end comes from W_hi.
      const bool rlo_open = (mpfr_rec_sqrt(rlo.get(), whi.get(), MPFR_RNDD) != 0) || whi_open;
      const bool rhi_open = (mpfr_rec_sqrt(rhi.get(), wlo.get(), MPFR_RNDU) != 0) || wlo_open;
      if (square) {
        mpfr_div(rlo.get(), B.get(), A.get(), MPFR_RNDN);
        if (first) r.inv_rms[row] = mpfr_get_d(rlo.get(), MPFR_RNDN);
      } else if (first) {
        r.inv_rms[row] = mpfr_get_d(rlo.get(), MPFR_RNDN);
      }
      std::vector<std::size_t> still;
      for (const std::size_t i : pending) {
        bool lo_open = false, hi_open = false;
        if (square) {
          mpfr_mul(tb.get(), t[i].get(), B.get(), MPFR_RNDN);  // exact
          lo_open = mpfr_div(ylo.get(), tb.get(), A.get(), MPFR_RNDD) != 0;
          hi_open = mpfr_div(yhi.get(), tb.get(), A.get(), MPFR_RNDU) != 0;
        } else {
          const bool pos = mpfr_sgn(t[i].get()) > 0;
          lo_open = (mpfr_mul(ylo.get(), t[i].get(), pos ? rlo.get() : rhi.get(), MPFR_RNDD) != 0) ||
                    (pos ? rlo_open : rhi_open);
          hi_open = (mpfr_mul(yhi.get(), t[i].get(), pos ? rhi.get() : rlo.get(), MPFR_RNDU) != 0) ||
                    (pos ? rhi_open : rlo_open);
        }
        const std::size_t k = row * d + i;
        r.approx[k] = mpfr_get_d(ylo.get(), MPFR_RNDN);
        const detail::Rounded cr = detail::certify(o.out, o.round, ylo.get(), yhi.get(), lo_open, hi_open);
        if (cr.ok) {
          r.y[k] = cr.value;
        } else {
          best[i] = round_to(o.out, r.approx[k], o.round);
          still.push_back(i);
        }
      }
      pending.swap(still);
      first = false;
      r.precision_bits = std::max(r.precision_bits, static_cast<int>(P));
    }
    if (!pending.empty()) {
      if (o.throw_if_uncertified)
        throw std::runtime_error(std::string(kFn) + ": could not certify the rounding of y[" + std::to_string(row) +
                                 "][" + std::to_string(pending.front()) +
                                 "] within max_prec = " + std::to_string(o.max_prec) + " bits");
      for (const std::size_t i : pending) {
        r.y[row * d + i] = best[i];
        r.certified[row * d + i] = 0;
      }
    }
  }
  return r;
}

}  // namespace kvconf::ref
