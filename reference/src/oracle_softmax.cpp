// Oracle: softmax of one score vector, each probability correctly rounded and certified.
//
// x_j = s_j − max (exact MPFR subtraction), then Ziv levels P = 64, 128, ... <= max_prec, each an
// interval evaluation with MPFR's directed rounding:
//   e_j ∈ [RD_P(exp x_j), RU_P(exp x_j)],  S ∈ [RD(Σ e_lo), RU(Σ e_hi)] (mpfr_sum, correctly rounded),
//   p_j ∈ [RD(e_lo/S_hi), RU(e_hi/S_lo)],
// keeping track of which ends are strict (any rounding on the way, or any term with x ≠ 0). A strict
// end is certified by its one-sided limit, so p_max = 1/(1 + tiny) rounds below 1 under round-down
// even when tiny is far below 2^-max_prec, and p = e^-5000/S rounds to +0 or up to the smallest
// subnormal as the mode says.
// p_j is rational only when all visible scores are equal (Lindemann–Weierstrass); then p = 1/n_visible
// is rounded exactly.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_detail.hpp"

namespace kvconf::ref {

SoftmaxResult softmax(std::span<const double> scores, Format in, const OracleOptions& o) {
  static constexpr char kFn[] = "kvconf::ref::softmax";
  const detail::Range rs = detail::check_values(kFn, "scores", scores, in, /*allow_neg_inf=*/true);
  const std::size_t n = scores.size();
  SoftmaxResult r;
  r.p.assign(n, 0.0);
  r.approx.assign(n, 0.0);
  r.certified.assign(n, 1);
  r.max_score = -HUGE_VAL;
  std::vector<std::size_t> vis;  // indices of unmasked scores
  for (std::size_t j = 0; j < n; ++j)
    if (std::isfinite(scores[j])) {
      vis.push_back(j);
      r.max_score = std::max(r.max_score, scores[j]);
    }
  r.n_visible = vis.size();
  if (vis.empty()) return r;
  const std::size_t nv = vis.size();

  // Exact differences x_j = s_j − max.
  const mpfr_prec_t xprec = std::max<mpfr_prec_t>(rs.span() + 2, 8);
  std::vector<Mpfr> x;
  x.reserve(nv);
  bool all_equal = true;
  for (const std::size_t j : vis) {
    x.emplace_back(xprec);
    mpfr_set_d(x.back().get(), scores[j], MPFR_RNDN);
    mpfr_sub_d(x.back().get(), x.back().get(), r.max_score, MPFR_RNDN);  // exact
    all_equal = all_equal && scores[j] == r.max_score;
  }
  if (all_equal) {
    Mpfr one(8);
    mpfr_set_ui(one.get(), 1, MPFR_RNDN);
    const double pv = detail::round_quotient(o.out, o.round, one.get(), static_cast<unsigned long>(nv));
    for (const std::size_t j : vis) {
      r.p[j] = pv;
      r.approx[j] = 1.0 / static_cast<double>(nv);
    }
    r.sum_exp = static_cast<double>(nv);
    return r;
  }

  // Interval evaluation with MPFR's directed rounding over the whole exponent range (no term
  // underflows for |x_j| < 3e18).
  const ExponentRange wide(mpfr_get_emin_min(), mpfr_get_emax_max());
  std::vector<std::size_t> pending(nv);
  for (std::size_t t = 0; t < nv; ++t) pending[t] = t;
  std::vector<double> best(nv, 0.0);
  std::vector<Mpfr> elo, ehi;
  elo.reserve(nv);
  ehi.reserve(nv);
  for (std::size_t t = 0; t < nv; ++t) {
    elo.emplace_back(64);
    ehi.emplace_back(64);
  }
  std::vector<mpfr_ptr> plo(nv), phi(nv);
  std::vector<char> exact(nv, 0);
  bool first = true;
  const mpfr_prec_t top = std::max<mpfr_prec_t>(o.max_prec, 32);
  for (mpfr_prec_t P = std::min<mpfr_prec_t>(64, top); !pending.empty() && P <= top; P *= 2) {
    bool all_exact = true;
    for (std::size_t t = 0; t < nv; ++t) {
      mpfr_set_prec(elo[t].get(), P);
      mpfr_set_prec(ehi[t].get(), P);
      const int a = mpfr_exp(elo[t].get(), x[t].get(), MPFR_RNDD);
      mpfr_exp(ehi[t].get(), x[t].get(), MPFR_RNDU);
      exact[t] = a == 0;  // only x = 0
      all_exact = all_exact && exact[t];
      plo[t] = elo[t].get();
      phi[t] = ehi[t].get();
    }
    const mpfr_prec_t Pb = P + 8;
    Mpfr slo(Pb), shi(Pb), lo(Pb), hi(Pb);
    // S_lo <= S <= S_hi; strict where a term or the sum was rounded.
    const bool slo_strict = mpfr_sum(slo.get(), plo.data(), nv, MPFR_RNDD) != 0 || !all_exact;
    const bool shi_strict = mpfr_sum(shi.get(), phi.data(), nv, MPFR_RNDU) != 0 || !all_exact;
    if (first) {
      Mpfr S(53);
      mpfr_sum(S.get(), plo.data(), nv, MPFR_RNDN);
      r.sum_exp = mpfr_get_d(S.get(), MPFR_RNDN);
      for (std::size_t t = 0; t < nv; ++t) r.approx[vis[t]] = mpfr_get_d(elo[t].get(), MPFR_RNDN) / r.sum_exp;
      first = false;
    }
    std::vector<std::size_t> still;
    for (const std::size_t t : pending) {
      // p = e/S ∈ [e_lo/S_hi, e_hi/S_lo], with the same strictness bookkeeping.
      const bool lo_open = (mpfr_div(lo.get(), elo[t].get(), shi.get(), MPFR_RNDD) != 0) || !exact[t] || shi_strict;
      const bool hi_open = (mpfr_div(hi.get(), ehi[t].get(), slo.get(), MPFR_RNDU) != 0) || !exact[t] || slo_strict;
      const detail::Rounded c = detail::certify(o.out, o.round, lo.get(), hi.get(), lo_open, hi_open);
      if (c.ok)
        r.p[vis[t]] = c.value;
      else {
        best[t] = round_to(o.out, r.approx[vis[t]], o.round);
        still.push_back(t);
      }
    }
    pending.swap(still);
    r.precision_bits = static_cast<int>(P);
  }
  if (!pending.empty()) {
    if (o.throw_if_uncertified)
      throw std::runtime_error(std::string(kFn) + ": could not certify the rounding of p[" +
                               std::to_string(vis[pending.front()]) +
                               "] within max_prec = " + std::to_string(o.max_prec) + " bits");
    for (const std::size_t t : pending) {
      r.p[vis[t]] = best[t];
      r.certified[vis[t]] = 0;
    }
  }
  return r;
}

}  // namespace kvconf::ref
