// Attention oracle, step 1: exact scores D_j = q·k_j (int fixed point or exact MPFR) and the logit
// differences x_j = z_j − z_m at a working precision, with their error bounds (softcap, 1/sqrt(d)).
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

void RowEval::scores() {
  const std::size_t d = s_.sh.d;
  if (s_.int_qk) {
    const double* qd = s_.q.data() + (i_ * s_.sh.n_heads + h_) * d;
    for (std::size_t t = 0; t < d; ++t) {
      Qr_[t] = static_cast<std::int64_t>(qd[t] * s_.sq);  // exact
      Qa_[t] = Qr_[t] < 0 ? -Qr_[t] : Qr_[t];
    }
    const std::int64_t* qr = Qr_.data();
    const std::int64_t* qa = Qa_.data();
    if (s_.fused) {  // K's rows of this head tested as they are converted (oracle_attention_setup.cpp)
      detail::ConvertCheck chk(s_.in);
      for (std::size_t j = 0; j < nv_; ++j) {
        std::int64_t acc = 0, aabs = 0;
        chk.dot_i32(qr, qa, s_.krow(jl_ + j, g_), d, &acc, &aabs);
        D_[j] = acc;
        Dabs_[j] = aabs;
      }
      int bits = 0;
      if (!chk.finish(&bits)) s_.invalid_or_abandon();
      // Exact products of |Q| < 2^span_q and |K| < 2^bits; every partial sum below 2^63 in magnitude.
      if (s_.span_q + bits + detail::ceil_log2(d) > 63) throw Abandon{};
    }
    for (std::size_t j = 0; j < nv_ && !s_.fused; ++j) {
      // K row j as integers K·2^-lo_k: converted once per call (pre), else here, where it is read once.
      if (!s_.pre && s_.qk32) {
        std::int64_t acc = 0, aabs = 0;
        detail::dot_i32_from_double(qr, qa, s_.krow(jl_ + j, g_), s_.sk, d, &acc, &aabs);
        D_[j] = acc;
        Dabs_[j] = aabs;
        continue;
      }
      const std::int64_t* kr = Kscr_.data();
      if (s_.pre)
        kr = s_.kirow(jl_ + j, g_);
      else
        detail::to_int(s_.krow(jl_ + j, g_), s_.sk, Kscr_.data(), d, s_.k32);
      if (s_.qk32) {
        std::int64_t acc = 0, aabs = 0;
        detail::dot_i32(qr, qa, kr, d, &acc, &aabs);
        D_[j] = acc;
        Dabs_[j] = aabs;
      } else if (s_.qk64) {
        std::int64_t acc = 0, aabs = 0;
        for (std::size_t t = 0; t < d; ++t) {
          acc += qr[t] * kr[t];
          aabs += qa[t] * (kr[t] < 0 ? -kr[t] : kr[t]);
        }
        D_[j] = acc;
        Dabs_[j] = aabs;
      } else {
        i128 acc = 0, aabs = 0;
        for (std::size_t t = 0; t < d; ++t) {
          acc += static_cast<i128>(qr[t]) * kr[t];
          aabs += static_cast<i128>(qa[t]) * (kr[t] < 0 ? -kr[t] : kr[t]);
        }
        D_[j] = acc;
        Dabs_[j] = aabs;
      }
    }
    m_ = 0;
    for (std::size_t j = 1; j < nv_; ++j)
      if ((s_.sgn > 0 && D_[j] > D_[m_]) || (s_.sgn < 0 && D_[j] < D_[m_])) m_ = j;
  } else {
    detail::ExactDot ed;
    const double* qr = s_.q.data() + (i_ * s_.sh.n_heads + h_) * d;
    for (std::size_t j = 0; j < nv_; ++j) ed.compute(Dm_[j].get(), qr, 1, s_.krow(jl_ + j, g_), 1, d, &Dabs_d_[j]);
    m_ = 0;
    for (std::size_t j = 1; j < nv_; ++j) {
      const int c = mpfr_cmp(Dm_[j].get(), Dm_[m_].get());
      if ((s_.sgn > 0 && c > 0) || (s_.sgn < 0 && c < 0)) m_ = j;
    }
  }
}

void RowEval::begin_logits(mpfr_prec_t Pw) {
  Pw_ = Pw;
  if (s_.pr.exact_inv_sqrt_d) {
    mpfr_set_prec(tau_.get(), Pw);
    mpfr_set_ui(tau_.get(), static_cast<unsigned long>(s_.sh.d), MPFR_RNDN);
    tau_exact_ = mpfr_rec_sqrt(tau_.get(), tau_.get(), MPFR_RNDN) == 0;
  } else {
    mpfr_set_prec(tau_.get(), 53);
    mpfr_set_d(tau_.get(), s_.pr.scale, MPFR_RNDN);
    tau_exact_ = true;
  }
  mpfr_mul_2si(tau_.get(), tau_.get(), s_.E, MPFR_RNDN);  // exact
  // x̂ holds an exact product ΔD·τ when τ is exact.
  mpfr_set_prec(x_.get(), std::max<mpfr_prec_t>(Pw, Dprec_ + mpfr_get_prec(tau_.get()) + 1));
  if (s_.pr.softcap > 0) {
    mpfr_set_prec(a_.get(), tau_exact_ ? Dprec_ + 54 : Pw);
    for (Mpfr* z : {&t_, &th_, &l_, &tm_, &lm_}) mpfr_set_prec(z->get(), Pw);
    softcapped(m_, tm_.get(), lm_.get());
  }
}

void RowEval::softcapped(std::size_t j, mpfr_ptr t, mpfr_ptr l) {
  value(j, Dj_.get());
  mpfr_mul(a_.get(), Dj_.get(), tau_.get(), MPFR_RNDN);  // exact when τ is exact
  mpfr_div(t, a_.get(), cap_.get(), MPFR_RNDN);
  mpfr_tanh(th_.get(), t, MPFR_RNDN);
  mpfr_mul(l, th_.get(), cap_.get(), MPFR_RNDN);
}

double RowEval::logit_diff(std::size_t j) {
  if (j == m_ || same_score(j, m_)) {  // identical computation: x = 0 exactly
    mpfr_set_zero(x_.get(), 1);
    return 0.0;
  }
  if (s_.pr.softcap <= 0) {
    delta(j, dD_.get());
    const int tern = mpfr_mul(x_.get(), dD_.get(), tau_.get(), MPFR_RNDN);
    if (tau_exact_ && tern == 0) return 0.0;
    // x̂ = x(1+ε1)(1+ε2), |ε| <= u = 2^-Pw  ⇒  |x̂ − x| <= 2.01u|x̂| (u tiny); 2.1 for margin.
    return 2.1 * std::fabs(mpfr_get_d(x_.get(), MPFR_RNDA));
  }
  softcapped(j, t_.get(), l_.get());
  mpfr_sub(x_.get(), l_.get(), lm_.get(), MPFR_RNDN);
  // t̂ = t(1+θ), |θ| <= 1.01·k_t·u (k_t roundings); |tanh t̂ − tanh t| <= |t̂ − t|; one rounding each
  // for tanh, ·c and the difference:
  //   |x̂ − x| <= u·( c·(1.02 k_t (|t̂_j| + |t̂_m|) + 4.02) + |x̂| ),  taken ×1.01.
  const double kt = tau_exact_ ? 1.0 : 3.0;
  const double c = s_.pr.softcap;
  const double tj = std::fabs(mpfr_get_d(t_.get(), MPFR_RNDA));
  const double tm = std::fabs(mpfr_get_d(tm_.get(), MPFR_RNDA));
  const double xa = std::fabs(mpfr_get_d(x_.get(), MPFR_RNDA));
  return 1.01 * (c * (1.02 * kt * (tj + tm) + 4.02) + xa);
}

}  // namespace kvconf::ref::attention_impl
