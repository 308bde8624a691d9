// Attention oracle, steps 2–4: the certification levels of one row — level 0 (int128 fixed point),
// the exact-rational test, the MPFR Ziv levels — and the condition quantities.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/reference/mpfr_format.hpp"
#include "oracle_attention_row.hpp"
#include "oracle_kernels.hpp"

namespace kvconf::ref::attention_impl {

void RowEval::finish_element(std::size_t c, double value, double approx, Outputs& out) {
  out.res.out[out.base + c] = value;
  out.res.approx[out.base + c] = approx;
  o_[c] = approx;
}

// Column c's bracket is [lo_, hi_]: round it if both ends round alike (returns true), else keep the
// rounding of the approximation as the best guess so far (returns false).
bool RowEval::settle(std::size_t c, double approx, Outputs& out) {
  const detail::Rounded r = detail::certify(s_.op.out, s_.op.round, lo_.get(), hi_.get());
  o_[c] = approx;
  out.res.approx[out.base + c] = approx;
  if (r.ok) {
    finish_element(c, r.value, approx, out);
    return true;
  }
  best_[c] = round_to(s_.op.out, approx, s_.op.round);
  return false;
}

// Level 0. Returns false (nothing done) when it does not apply to this row.
bool RowEval::level0(Outputs& out) {
  if (s_.F == 0) return false;
  const int F = s_.F;
  const std::size_t dv = s_.sh.d_v;
  const bool caseA = !s_.pr.exact_inv_sqrt_d && s_.pr.softcap <= 0;
  if (caseA && s_.int_qk) {
    // ŷ_j = |ΔD_j|·KL entirely in integers (make_yscale): y − ŷ <= y·2^-126 + 2^-64, within the
    // fixed-point exp's budget (f truncated to 64 bits, input error <= 2^-120 for y < 64).
    const auto lim = static_cast<std::uint64_t>(F) + 2;
    for (std::size_t j = 0; j < nv_; ++j) {
      const i128 dd = D_[j] - D_[m_];
      const auto a = static_cast<detail::u128>(dd < 0 ? -dd : dd);
      std::uint64_t k = 0, f64 = 0;
      Et_[j] = (s_.sgn == 0 || a == 0)                       ? (std::uint64_t{1} << F)
               : detail::apply_yscale(ys_, a, lim, &k, &f64) ? detail::fixed_exp2_neg_parts(k, f64, F)
                                                             : 0;
    }
  }
  if (!caseA) begin_logits(192);
  const double lim = std::ldexp(1.0, -120);
  for (std::size_t j = 0; j < nv_ && !(caseA && s_.int_qk); ++j) {
    if (caseA) {
      if (same_score(j, m_)) {
        mpfr_set_zero(y_.get(), 1);
      } else {
        delta(j, dD_.get());
        mpfr_abs(dD_.get(), dD_.get(), MPFR_RNDN);
        mpfr_mul(y_.get(), dD_.get(), KL_.get(), MPFR_RNDN);  // |ŷ − y| <= 2^-127 y + 2^-190 y
      }
    } else {
      const double dx = std::ldexp(logit_diff(j), -192);
      mpfr_mul(y_.get(), x_.get(), detail::log2e_256(), MPFR_RNDN);
      mpfr_neg(y_.get(), y_.get(), MPFR_RNDN);
      if (mpfr_sgn(y_.get()) < 0) mpfr_set_zero(y_.get(), 1);  // cannot happen (monotone rounding)
      const double yd = mpfr_get_d(y_.get(), MPFR_RNDU);
      const double yerr = 1.01 * (1.4427 * dx + std::ldexp(yd, -127) + std::ldexp(yd, -250));
      if (!(yerr <= lim)) return false;
    }
    Et_[j] = detail::fixed_exp2_neg(y_.get(), F, ytmp_.get());
  }
  // Exact sums: Σ̃ = Σ Ẽ_j, Ñ_c = Σ Ẽ_j V_jc, and Σ_j |V_jc| over all visible j. V: (n_kv, Hk, d_v).
  // V_jc = v_jc·sv is exact (an integer below 2^62).
  // V rows as integers: converted once per call (pre), else here per chunk of keys (each row is read once).
  i128 St = 0;
  for (std::size_t j = 0; j < nv_; ++j) St += Et_[j];
  std::fill(Nc_.begin(), Nc_.end(), 0);
  std::fill(AVc_.begin(), AVc_.end(), 0);
  std::fill(AV64_.begin(), AV64_.end(), 0);
  const bool prefix = s_.pre && s_.av64;  // Σ_j |V_jc| over [jl, jh) from the prefix sums
  std::int64_t* av64 = !prefix && s_.av64 ? AV64_.data() : nullptr;
  const std::size_t chunk = s_.pre ? kPreChunk : kRowChunk;
  detail::ConvertCheck chk(s_.in);  // fused: V's rows of this head tested as they are converted
  for (std::size_t j0 = 0; j0 < nv_; j0 += chunk) {
    const std::size_t m = std::min(chunk, nv_ - j0);
    for (std::size_t t = 0; t < m; ++t) {
      const std::size_t j = jl_ + j0 + t;
      if (s_.pre) {
        vrows_[t] = s_.virow(j, g_);
      } else {
        vrows_[t] = Vscr_.data() + t * dv;
        if (s_.fused)
          chk.to_int(s_.vrow(j, g_), dv, Vscr_.data() + t * dv);
        else
          detail::to_int(s_.vrow(j, g_), s_.sv, Vscr_.data() + t * dv, dv, s_.v32);
      }
      if (!s_.av64) detail::add_abs(vrows_[t], dv, AVc_.data());  // else the prefix sums or accumulate_ev's
    }
    // int32 values: V's span <= 31, or the fused path's conversions (values that fail its test give int32 too).
    detail::accumulate_ev(Et_.data() + j0, vrows_.data(), m, dv, s_.v32, Nc_.data(), av64);
  }
  if (s_.fused) {
    int bits = 0;  // an int32 value each (|V| <= 2^31): the limbs' products and sums were exact
    if (!chk.finish(&bits)) s_.invalid_or_abandon();
    v_checked_ = true;
  }
  if (prefix) {
    const std::int64_t *a = s_.avprow(jl_, g_), *b = s_.avprow(jl_ + nv_, g_);
    for (std::size_t c = 0; c < dv; ++c) AVc_[c] = b[c] - a[c];
  } else if (s_.av64) {
    for (std::size_t c = 0; c < dv; ++c) AVc_[c] = AV64_[c];
  }
  const i128* AV = AVc_.data();
  const i128 eta = static_cast<i128>(detail::kFixedExpEta);
  const i128 sl = St - eta * static_cast<i128>(nv_), sh = St + eta * static_cast<i128>(nv_);  // > 0: St >= 2^F
  const double Sd = static_cast<double>(St);
  const int ev = s_.rv.lo;
  const bool pev_ok = ev >= -1022 && ev <= 1023;
  const double pev = pev_ok ? std::ldexp(1.0, ev) : 0.0;  // ·2^ev is exact for normal results (checked)
  for (std::size_t c = 0; c < dv; ++c) {
    const i128 av = AV[c];
    const i128 nl = Nc_[c] - eta * av, nh = Nc_[c] + eta * av;
    const double approx =
        pev_ok ? static_cast<double>(Nc_[c]) / Sd * pev : std::ldexp(static_cast<double>(Nc_[c]) / Sd, ev);
    // Double bracket: each quotient carries <= 3 roundings (2 conversions, 1 division) and the
    // widening ql − |ql|·2^-50 itself one more; (1 + 2^-53)^4 · (1 − 2^-50) < 1, so widening by 2^-50
    // relative still covers all four. Only used away from the subnormal range.
    const double ql = static_cast<double>(nl) / static_cast<double>(nl >= 0 ? sh : sl);
    const double qh = static_cast<double>(nh) / static_cast<double>(nh >= 0 ? sl : sh);
    const double lo = (ql - std::fabs(ql) * 0x1p-50) * pev;
    const double hi = (qh + std::fabs(qh) * 0x1p-50) * pev;
    const bool normal = (lo == 0.0 || std::fabs(lo) > 0x1p-1000) && (hi == 0.0 || std::fabs(hi) > 0x1p-1000);
    if (normal && pev_ok) {
      const detail::Rounded r = detail::certify_d(s_.op.out, s_.op.round, lo, hi);
      if (r.ok) {
        finish_element(c, r.value, approx, out);
        continue;
      }
    }
    // Exact bracket in MPFR.
    for (Mpfr* z : {&slo_, &shi_, &nlo_, &nhi_, &lo_, &hi_}) mpfr_set_prec(z->get(), 128);
    detail::set_i128(slo_.get(), sl);
    detail::set_i128(shi_.get(), sh);
    detail::set_i128(nlo_.get(), nl);
    detail::set_i128(nhi_.get(), nh);
    mpfr_div(lo_.get(), nlo_.get(), nl >= 0 ? shi_.get() : slo_.get(), MPFR_RNDD);
    mpfr_div(hi_.get(), nhi_.get(), nh >= 0 ? slo_.get() : shi_.get(), MPFR_RNDU);
    mpfr_mul_2si(lo_.get(), lo_.get(), ev, MPFR_RNDD);
    mpfr_mul_2si(hi_.get(), hi_.get(), ev, MPFR_RNDU);
    if (!settle(c, approx, out)) pending_.push_back(c);
  }
  for (std::size_t j = 0; j < nv_; ++j) p_[j] = static_cast<double>(Et_[j]) / Sd;
  sum_exp_ = std::ldexp(Sd, -F);
  prec_used_ = F;
  return true;
}

// MPFR level at precision P over the pending columns (all columns when first).
void RowEval::level_mpfr(mpfr_prec_t P, bool first, Outputs& out) {
  begin_logits(P + 64);
  if (e_.size() < nv_) {
    e_.reserve(s_.sh.n_kv);
    prods_.reserve(s_.sh.n_kv);
    while (e_.size() < nv_) e_.emplace_back(P);
    while (prods_.size() < nv_) prods_.emplace_back(P + 53);
  }
  const double thr = -static_cast<double>(2 * P + 64) * 0.6931471805599453 - 1.0;
  const double half_scale = std::ldexp(0.5, static_cast<int>(P + 64));  // κ < this ⇔ δx < 1/2
  double kmax = 0.0;
  std::size_t nk = 0, ndrop = 0;
  for (std::size_t j = 0; j < nv_; ++j) {
    const double kj = logit_diff(j);
    if (mpfr_cmp_d(x_.get(), thr) < 0 && kj < half_scale) {  // e_j < e^{thr + 1/2} < ω
      ++ndrop;
      continue;
    }
    mpfr_set_prec(e_[nk].get(), P);
    mpfr_exp(e_[nk].get(), x_.get(), MPFR_RNDN);
    eptr_[nk] = e_[nk].get();
    kept_[nk] = j;
    kmax = std::max(kmax, kj);
    ++nk;
  }
  // ρ = 1.01(u + max δx) = rc·u with u = 2^-P, δx <= κ·2^-(P+64).
  const double rc = 1.01 * (1.0 + kmax * 0x1p-64) * (1.0 + 0x1p-40);
  const mpfr_prec_t Pb = P + 8;
  const long Pl = static_cast<long>(P);
  for (Mpfr* z : {&S_, &N_}) mpfr_set_prec(z->get(), P);
  for (Mpfr* z : {&tmp_, &lo_, &hi_, &slo_, &shi_, &nlo_, &nhi_}) mpfr_set_prec(z->get(), Pb);
  mpfr_sum(S_.get(), eptr_.data(), nk, MPFR_RNDN);
  const double Sd = mpfr_get_d(S_.get(), MPFR_RNDN);
  if (first) {
    std::fill(p_.begin(), p_.begin() + static_cast<std::ptrdiff_t>(nv_), 0.0);
    for (std::size_t t = 0; t < nk; ++t) p_[kept_[t]] = mpfr_get_d(e_[t].get(), MPFR_RNDN) / Sd;
    sum_exp_ = Sd;
  }
  if (!(rc <= std::ldexp(1.0, static_cast<int>(P) - 10))) return;  // ρ > 2^-10: try the next level
  // S_lo = Ŝ(1−u)/(1+ρ), S_hi = Ŝ(1+u)/(1−ρ) + n_drop ω (all in MPFR: u underflows a double).
  mpfr_set_ui_2exp(tmp_.get(), 1, -Pl, MPFR_RNDN);
  mpfr_ui_sub(tmp_.get(), 1, tmp_.get(), MPFR_RNDD);  // 1 − u, exact at P + 8 bits
  mpfr_mul(slo_.get(), S_.get(), tmp_.get(), MPFR_RNDD);
  mpfr_set_d(tmp_.get(), rc, MPFR_RNDU);
  mpfr_mul_2si(tmp_.get(), tmp_.get(), -Pl, MPFR_RNDU);
  mpfr_add_ui(tmp_.get(), tmp_.get(), 1, MPFR_RNDU);  // >= 1 + ρ
  mpfr_div(slo_.get(), slo_.get(), tmp_.get(), MPFR_RNDD);
  mpfr_set_ui_2exp(tmp_.get(), 1, -Pl, MPFR_RNDN);
  mpfr_add_ui(tmp_.get(), tmp_.get(), 1, MPFR_RNDU);  // 1 + u
  mpfr_mul(shi_.get(), S_.get(), tmp_.get(), MPFR_RNDU);
  mpfr_set_d(tmp_.get(), rc, MPFR_RNDU);
  mpfr_mul_2si(tmp_.get(), tmp_.get(), -Pl, MPFR_RNDU);
  mpfr_ui_sub(tmp_.get(), 1, tmp_.get(), MPFR_RNDD);  // <= 1 − ρ
  mpfr_div(shi_.get(), shi_.get(), tmp_.get(), MPFR_RNDU);
  const long omega_exp = -(2 * Pl + 64);
  if (ndrop > 0) {
    mpfr_set_ui_2exp(tmp_.get(), static_cast<unsigned long>(ndrop), omega_exp, MPFR_RNDU);
    mpfr_add(shi_.get(), shi_.get(), tmp_.get(), MPFR_RNDU);
  }
  std::vector<std::size_t> still;
  for (const std::size_t c : pending_) {
    double vmax = 0.0;
    for (std::size_t j = 0; j < nv_; ++j) vmax = std::max(vmax, std::fabs(s_.vrow(jl_ + j, g_)[c]));
    for (std::size_t t = 0; t < nk; ++t) {
      mpfr_set_prec(prods_[t].get(), P + 53);
      mpfr_mul_d(prods_[t].get(), e_[t].get(), s_.vrow(jl_ + kept_[t], g_)[c], MPFR_RNDN);  // exact
      pptr_[t] = prods_[t].get();
    }
    mpfr_sum(N_.get(), pptr_.data(), nk, MPFR_RNDN);
    // err = u|N̂| + ρ/(1−ρ)·Ŝ(1+u)·vmax + n_drop ω vmax, rounded up; with ρ <= 2^-10,
    // ρ/(1−ρ)(1+u) <= 1.003ρ <= 1.004·rc·2^-P (the double product's rounding is in the 1 + 2^-40).
    mpfr_abs(err_.get(), N_.get(), MPFR_RNDU);
    mpfr_mul_2si(err_.get(), err_.get(), -Pl, MPFR_RNDU);
    mpfr_mul_d(err2_.get(), S_.get(), 1.004 * rc * vmax * (1.0 + 0x1p-40), MPFR_RNDU);
    mpfr_mul_2si(err2_.get(), err2_.get(), -Pl, MPFR_RNDU);
    mpfr_add(err_.get(), err_.get(), err2_.get(), MPFR_RNDU);
    if (ndrop > 0 && vmax > 0) {
      mpfr_set_ui_2exp(err2_.get(), static_cast<unsigned long>(ndrop), omega_exp, MPFR_RNDU);
      mpfr_mul_d(err2_.get(), err2_.get(), vmax, MPFR_RNDU);
      mpfr_add(err_.get(), err_.get(), err2_.get(), MPFR_RNDU);
    }
    mpfr_sub(nlo_.get(), N_.get(), err_.get(), MPFR_RNDD);
    mpfr_add(nhi_.get(), N_.get(), err_.get(), MPFR_RNDU);
    mpfr_div(lo_.get(), nlo_.get(), mpfr_sgn(nlo_.get()) >= 0 ? shi_.get() : slo_.get(), MPFR_RNDD);
    mpfr_div(hi_.get(), nhi_.get(), mpfr_sgn(nhi_.get()) >= 0 ? slo_.get() : shi_.get(), MPFR_RNDU);
    const double approx = mpfr_get_d(N_.get(), MPFR_RNDN) / Sd;
    if (!settle(c, approx, out)) still.push_back(c);
  }
  pending_.swap(still);
  prec_used_ = static_cast<int>(P);
}

// Exact rational elements among the pending columns (see oracle.hpp): group the visible keys by
// equal score; o_c is rational iff every group has the same mean of v_·c, and then equals it.
void RowEval::rational(Outputs& out) {
  std::vector<std::size_t> order(nv_);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (s_.sgn != 0) {
    if (s_.int_qk)
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return D_[a] < D_[b]; });
    else
      std::sort(order.begin(), order.end(),
                [&](std::size_t a, std::size_t b) { return mpfr_less_p(Dm_[a].get(), Dm_[b].get()) != 0; });
  }
  std::vector<std::size_t> gbeg{0};  // group g = order[gbeg[g] .. gbeg[g+1])
  std::size_t g0 = 0;
  for (std::size_t t = 1; t < nv_; ++t)
    if (!same_score(order[t], order[t - 1])) gbeg.push_back(t);
  gbeg.push_back(nv_);
  const std::size_t ng = gbeg.size() - 1;
  for (std::size_t g = 0; g < ng; ++g)
    for (std::size_t t = gbeg[g]; t < gbeg[g + 1]; ++t)
      if (order[t] == m_) g0 = g;
  const mpfr_prec_t ps = std::max<mpfr_prec_t>(s_.rv.span() + detail::ceil_log2(nv_) + 4, 8);
  if (ng == nv_) {
    // All scores distinct: rational iff every visible v_jc is the same value, which o then equals.
    std::vector<std::size_t> still;
    for (const std::size_t c : pending_) {
      const double v0 = s_.vrow(jl_, g_)[c];
      bool eq = true;
      for (std::size_t j = 1; j < nv_ && eq; ++j) eq = s_.vrow(jl_ + j, g_)[c] == v0;
      if (!eq) {
        still.push_back(c);
        continue;
      }
      finish_element(c, round_to(s_.op.out, v0, s_.op.round), v0, out);
      rational_used_ = true;
    }
    pending_.swap(still);
    return;
  }
  std::vector<Mpfr> vals;
  vals.reserve(nv_);
  for (std::size_t t = 0; t < nv_; ++t) vals.emplace_back(53);
  std::vector<mpfr_ptr> ptr(nv_);
  Mpfr s0(ps), sg(ps), lhs(ps + 64), rhs(ps + 64);
  std::vector<std::size_t> still;
  for (const std::size_t c : pending_) {
    for (std::size_t t = 0; t < nv_; ++t) {
      mpfr_set_d(vals[t].get(), s_.vrow(jl_ + order[t], g_)[c], MPFR_RNDN);
      ptr[t] = vals[t].get();
    }
    const auto gsum = [&](std::size_t g, mpfr_ptr r) {
      mpfr_sum(r, ptr.data() + gbeg[g], gbeg[g + 1] - gbeg[g], MPFR_RNDN);  // exact at ps bits
    };
    gsum(g0, s0.get());
    const unsigned long n0 = gbeg[g0 + 1] - gbeg[g0];
    bool rat = true;
    for (std::size_t g = 0; g < ng && rat; ++g) {
      if (g == g0) continue;
      gsum(g, sg.get());
      mpfr_mul_ui(lhs.get(), sg.get(), n0, MPFR_RNDN);                     // exact
      mpfr_mul_ui(rhs.get(), s0.get(), gbeg[g + 1] - gbeg[g], MPFR_RNDN);  // exact
      rat = mpfr_equal_p(lhs.get(), rhs.get()) != 0;
    }
    if (!rat) {
      still.push_back(c);
      continue;
    }
    const double value = detail::round_quotient(s_.op.out, s_.op.round, s0.get(), n0);
    mpfr_div_ui(lhs.get(), s0.get(), n0, MPFR_RNDN);
    finish_element(c, value, mpfr_get_d(lhs.get(), MPFR_RNDN), out);
    rational_used_ = true;
  }
  pending_.swap(still);
}

void RowEval::conditions(Outputs& out) {
  const std::size_t dv = s_.sh.d_v;
  double* A = out.res.sum_p_abs_v.data() + out.base;
  double* B = out.res.sum_p_abs_dev.data() + out.base;
  std::fill(A, A + dv, 0.0);
  std::fill(B, B + dv, 0.0);
  // Keys with p_j = 0 add nothing and are skipped; the others in key order (the order of the sums' roundings).
  std::size_t m = 0;
  for (std::size_t j = 0; j < nv_; ++j) {
    if (p_[j] == 0.0) continue;
    pc_[m] = p_[j];
    crow_[m++] = s_.vrow(jl_ + j, g_);
  }
  detail::condition_sums(pc_.data(), crow_.data(), m, dv, o_.data(), A, B);
}
}  // namespace kvconf::ref::attention_impl
