// Oracle: attention for one query block over one KV head group (MHA/GQA/MQA, causal mask with a
// query offset, sliding window, tanh softcap, any scale), correctly rounded and certified.
//
// Per (query row, head), over the visible keys j (a contiguous range):
//  1. Exact scores. D_j = q·k_j exactly (int128 fixed point, or exact MPFR products + mpfr_sum).
//     The argmax m of the logits is found exactly (logits are monotone in scale·D_j).
//  2. Level 0 (int128 fixed point; notes/numerics.md §3.1). ŷ_j = (z_m − z_j)·log2(e) within 2^-120
//     (pure integer arithmetic when z = scale·D: ŷ = |D_j − D_m|·KL, see detail::apply_yscale; else
//     from the MPFR logit difference at 192 bits), then Ẽ_j = round(2^F·2^-ŷ_j) by the proven
//     fixed-point exp (|Ẽ_j − 2^F e_j| <= η = 3, e_j = exp(z_j − z_m); F = 62 unless V's range is wide),
//     then Σ̃ = Σ Ẽ_j and Ñ_c = Σ Ẽ_j V_jc exactly in int128 (V_jc = v_jc·2^-ev integers). So
//       2^F·S ∈ [Σ̃ − η n, Σ̃ + η n],   2^(F−ev)·N_c ∈ [Ñ_c − η Σ_j|V_jc|, Ñ_c + η Σ_j|V_jc|],
//     and o_c = N_c / S lies in the quotient interval. Certified when both ends round alike.
//  3. Elements not certified: the exact rational test (header comment in oracle.hpp); rational
//     elements are rounded from the exact value.
//  4. MPFR levels P = 128, 256, ... <= max_prec. With u = 2^-P and working precision Pw = P + 64 for
//     the logit differences (x̂_j, with a bound δx_j on |x̂_j − x_j|, zero when exact):
//       ê_j = RN_P(exp(x̂_j))   ⇒ |ê_j/e_j − 1| <= (1+u)e^{δx_j} − 1 <= ρ := 1.01(u + max δx);
//       keys with x̂_j < −(2P+64)ln2 − 1 are dropped (e_j < ω := 2^-(2P+64));
//       Ŝ = mpfr_sum(ê) = RN_P(T), T = Σ_kept ê   ⇒ S ∈ [Ŝ(1−u)/(1+ρ), Ŝ(1+u)/(1−ρ) + n_drop ω];
//       N̂_c = mpfr_sum(ê_j v_jc) (exact products) ⇒ |N_c − N̂_c| <= u|N̂_c| + ρ/(1−ρ)·W + n_drop ω vmax,
//         W = Σ_kept ê_j|v_jc| <= Ŝ(1+u)·vmax, vmax = max_j |v_jc|.
//     This is the a-priori bound of the MPFR evaluation (relative (n + d)-free: the sums are
//     correctly rounded by mpfr_sum, so only one rounding per exp and per sum enters); the quotient
//     interval is evaluated with directed rounding. Certified when both ends round alike.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_detail.hpp"

namespace kvconf::ref {
namespace {

using detail::i128;
constexpr char kFn[] = "kvconf::ref::attention";
constexpr mpfr_prec_t kYPrec = 128;        // precision of ŷ for the fixed-point exp
constexpr mpfr_prec_t kFirstMpfrLevel = 128;

// Everything about one call that does not depend on the row.
struct Setup {
  AttentionShape sh;
  AttentionParams pr;
  OracleOptions op;
  std::span<const double> q, k, v;   // q: (n_q, H, d), k: (n_kv, Hk, d), v: (n_kv, Hk, d_v)
  std::size_t group = 1;             // n_heads / n_kv_heads
  int sgn = 1;                       // sign of the effective scale (0: all logits equal)
  // Exact scores. Int path: q = Q·2^lo_q, k = K·2^lo_k with integers |Q|, |K| < 2^62 (converted on
  // the fly by the exact multiplications q·sq, k·sk), q·k = D·2^E.
  bool int_qk = false;
  bool qk64 = false;                 // |D| and Σ|Q K| fit int64 (else int128)
  double sq = 0, sk = 0;             // 2^-lo_q, 2^-lo_k
  int E = 0;
  mpfr_prec_t dprec = 0;             // general path: precision holding any D_j or D_j − D_m exactly
  // Values: V = v·sv integers (level 0).
  detail::Range rv;
  int F = 0;                         // level-0 fraction bits; 0 = level 0 unavailable
  double sv = 0;                     // 2^-rv.lo
  bool av64 = false;                 // Σ_j |V_jc| fits int64

  const double* krow(std::size_t j, std::size_t g) const { return k.data() + (j * sh.n_kv_heads + g) * sh.d; }
  const double* vrow(std::size_t j, std::size_t g) const { return v.data() + (j * sh.n_kv_heads + g) * sh.d_v; }
};

struct Outputs {
  AttentionResult& res;
  std::size_t base = 0;  // (i, h) element offset into (n_q, H, d_v)
};

// One (query row, head): exact scores and all reusable scratch.
class RowEval {
 public:
  explicit RowEval(const Setup& s)
      : s_(s),
        Dprec_(std::max<mpfr_prec_t>(129, s.dprec + 1)),
        dD_(Dprec_),
        Dj_(Dprec_),
        tau_(64),
        cap_(53),
        a_(64),
        t_(64),
        th_(64),
        l_(64),
        x_(64),
        tm_(64),
        lm_(64),
        y_(kYPrec),
        ytmp_(kYPrec),
        KL_(192),
        S_(64),
        N_(64),
        tmp_(64),
        lo_(64),
        hi_(64),
        slo_(64),
        shi_(64),
        nlo_(64),
        nhi_(64),
        err_(64),
        err2_(64) {
    const std::size_t n = s.sh.n_kv, dv = s.sh.d_v;
    if (s.int_qk) {
      D_.resize(n);
      Dabs_.resize(n);
    } else {
      Dm_.reserve(n);
      for (std::size_t j = 0; j < n; ++j) Dm_.emplace_back(s.dprec);
      Dabs_d_.resize(n);
    }
    Et_.resize(n);
    p_.resize(n);
    Nc_.resize(dv);
    AVc_.resize(dv);
    AV64_.resize(dv);
    Qr_.resize(s.sh.d);
    Qa_.resize(s.sh.d);
    eptr_.resize(n);
    pptr_.resize(n);
    kept_.resize(n);
    pending_.reserve(dv);
    best_.resize(dv);
    o_.resize(dv);
    mpfr_set_d(cap_.get(), s.pr.softcap, MPFR_RNDN);
    if (!s.pr.exact_inv_sqrt_d) {
      // KL = |scale|·2^E·log2(e): ŷ_j = |ΔD_j|·KL (level 0, no softcap).
      mpfr_set_d(KL_.get(), std::fabs(s.pr.scale), MPFR_RNDN);
      mpfr_mul(KL_.get(), KL_.get(), detail::log2e_256(), MPFR_RNDN);
      mpfr_mul_2si(KL_.get(), KL_.get(), s.E, MPFR_RNDN);
      ys_ = detail::make_yscale(KL_.get());
    }
  }

  void run(std::size_t i, std::size_t h, AttentionResult& res);

 private:
  // --- exact scores --------------------------------------------------------------------------
  void scores();
  bool same_score(std::size_t a, std::size_t b) const {
    if (s_.sgn == 0) return true;
    if (s_.int_qk) return D_[a] == D_[b];
    return mpfr_equal_p(Dm_[a].get(), Dm_[b].get()) != 0;
  }
  void delta(std::size_t j, mpfr_ptr r) {  // r = D_j − D_m exactly
    if (s_.int_qk) detail::set_i128(r, D_[j] - D_[m_]);
    else mpfr_sub(r, Dm_[j].get(), Dm_[m_].get(), MPFR_RNDN);
  }
  void value(std::size_t j, mpfr_ptr r) {  // r = D_j exactly
    if (s_.int_qk) detail::set_i128(r, D_[j]);
    else mpfr_set(r, Dm_[j].get(), MPFR_RNDN);
  }

  // --- logit differences at working precision Pw -----------------------------------------------
  void begin_logits(mpfr_prec_t Pw);
  void softcapped(std::size_t j, mpfr_ptr t, mpfr_ptr l);  // t̂_j and ℓ̂_j at Pw
  // x_ := x̂_j <= 0; returns κ_j with |x̂_j − x_j| <= κ_j·2^-Pw (κ = 0: exact). The scale 2^-Pw is
  // kept apart because it underflows a double at high precision.
  double logit_diff(std::size_t j);

  // --- evaluation levels --------------------------------------------------------------------------
  bool level0(Outputs& out);
  void level_mpfr(mpfr_prec_t P, bool first, Outputs& out);
  void rational(Outputs& out);
  void finish_element(std::size_t c, double value, double approx, Outputs& out);
  void conditions(Outputs& out);

  const Setup& s_;
  mpfr_prec_t Dprec_;
  // row state
  std::size_t i_ = 0, h_ = 0, g_ = 0, jl_ = 0, nv_ = 0, m_ = 0;
  int prec_used_ = 0;
  bool rational_used_ = false;
  double sum_exp_ = 0.0;
  std::vector<i128> D_, Dabs_;         // (nv) int path: exact dots and Σ|q k|
  std::vector<Mpfr> Dm_;               // (nv) general path: exact dots
  std::vector<double> Dabs_d_;         // (nv) general path: Σ|q k| rounded up
  std::vector<std::uint64_t> Et_;      // (nv) level-0 weights Ẽ_j
  std::vector<double> p_;              // (nv) approximate probabilities (conditions)
  std::vector<i128> Nc_, AVc_;         // (d_v) level-0 numerators Ñ_c and Σ_j |V_jc|
  std::vector<std::int64_t> AV64_;     // (d_v) Σ_j |V_jc| when it fits int64
  std::vector<std::int64_t> Qr_, Qa_;  // (d) the query row as integers, and |.|
  std::vector<Mpfr> e_, prods_;        // (nv) MPFR-level ê_j and products
  std::vector<mpfr_ptr> eptr_, pptr_;
  std::vector<std::size_t> kept_;      // (nv) indices of kept keys in the MPFR level
  std::vector<std::size_t> pending_;   // columns not yet certified
  std::vector<double> best_;           // (d_v) best available rounding of a pending column
  std::vector<double> o_;              // (d_v) approximations of o_c (conditions)
  // logit state
  mpfr_prec_t Pw_ = 0;
  bool tau_exact_ = true;
  Mpfr dD_, Dj_, tau_, cap_, a_, t_, th_, l_, x_, tm_, lm_, y_, ytmp_, KL_;
  Mpfr S_, N_, tmp_, lo_, hi_, slo_, shi_, nlo_, nhi_, err_, err2_;
  detail::YScale ys_;  // ŷ_j = |ΔD_j|·KL in integer arithmetic (level 0, case A)
};

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
    const double sk = s_.sk;
    for (std::size_t j = 0; j < nv_; ++j) {
      const double* kr = s_.krow(jl_ + j, g_);
      if (s_.qk64) {
        std::int64_t acc = 0, aabs = 0;
        for (std::size_t t = 0; t < d; ++t) {
          const auto kk = static_cast<std::int64_t>(kr[t] * sk);
          acc += qr[t] * kk;
          aabs += qa[t] * (kk < 0 ? -kk : kk);
        }
        D_[j] = acc;
        Dabs_[j] = aabs;
      } else {
        i128 acc = 0, aabs = 0;
        for (std::size_t t = 0; t < d; ++t) {
          const auto kk = static_cast<std::int64_t>(kr[t] * sk);
          acc += static_cast<i128>(qr[t]) * kk;
          aabs += static_cast<i128>(qa[t]) * (kk < 0 ? -kk : kk);
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
    for (std::size_t j = 0; j < nv_; ++j)
      ed.compute(Dm_[j].get(), qr, 1, s_.krow(jl_ + j, g_), 1, d, &Dabs_d_[j]);
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

void RowEval::finish_element(std::size_t c, double value, double approx, Outputs& out) {
  out.res.out[out.base + c] = value;
  out.res.approx[out.base + c] = approx;
  o_[c] = approx;
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
    const auto lim = static_cast<std::uint64_t>(F + 2);
    for (std::size_t j = 0; j < nv_; ++j) {
      const i128 dd = D_[j] - D_[m_];
      const auto a = static_cast<detail::u128>(dd < 0 ? -dd : dd);
      std::uint64_t k = 0, f64 = 0;
      Et_[j] = (s_.sgn == 0 || a == 0) ? (std::uint64_t{1} << F)
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
  i128 St = 0;
  std::fill(Nc_.begin(), Nc_.end(), 0);
  std::fill(AVc_.begin(), AVc_.end(), 0);
  std::fill(AV64_.begin(), AV64_.end(), 0);
  i128* N = Nc_.data();
  const double sv = s_.sv;
  const auto accumulate = [&](auto* AV) {
    for (std::size_t j = 0; j < nv_; ++j) {
      const std::int64_t Ej = static_cast<std::int64_t>(Et_[j]);
      const double* vr = s_.vrow(jl_ + j, g_);
      if (Ej == 0) {
        for (std::size_t c = 0; c < dv; ++c) AV[c] += static_cast<std::int64_t>(std::fabs(vr[c]) * sv);
        continue;
      }
      St += Ej;
      for (std::size_t c = 0; c < dv; ++c) {
        const auto V = static_cast<std::int64_t>(vr[c] * sv);
        N[c] += static_cast<i128>(Ej) * V;
        AV[c] += V < 0 ? -V : V;
      }
    }
  };
  if (s_.av64) {
    accumulate(AV64_.data());
    for (std::size_t c = 0; c < dv; ++c) AVc_[c] = AV64_[c];
  } else {
    accumulate(AVc_.data());
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
    const double approx = pev_ok ? static_cast<double>(Nc_[c]) / Sd * pev
                                 : std::ldexp(static_cast<double>(Nc_[c]) / Sd, ev);
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
    const detail::Rounded r = detail::certify(s_.op.out, s_.op.round, lo_.get(), hi_.get());
    o_[c] = approx;
    out.res.approx[out.base + c] = approx;
    if (r.ok) finish_element(c, r.value, approx, out);
    else {
      best_[c] = round_to(s_.op.out, approx, s_.op.round);
      pending_.push_back(c);
    }
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
    const detail::Rounded r = detail::certify(s_.op.out, s_.op.round, lo_.get(), hi_.get());
    o_[c] = approx;
    out.res.approx[out.base + c] = approx;
    if (r.ok) finish_element(c, r.value, approx, out);
    else {
      best_[c] = round_to(s_.op.out, approx, s_.op.round);
      still.push_back(c);
    }
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
    if (s_.int_qk) std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return D_[a] < D_[b]; });
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
      mpfr_mul_ui(lhs.get(), sg.get(), n0, MPFR_RNDN);                         // exact
      mpfr_mul_ui(rhs.get(), s0.get(), gbeg[g + 1] - gbeg[g], MPFR_RNDN);      // exact
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
  for (std::size_t j = 0; j < nv_; ++j) {
    const double pj = p_[j];
    if (pj == 0.0) continue;
    const double* vr = s_.vrow(jl_ + j, g_);
    for (std::size_t c = 0; c < dv; ++c) {
      A[c] += pj * std::fabs(vr[c]);
      B[c] += pj * std::fabs(vr[c] - o_[c]);
    }
  }
}

void RowEval::run(std::size_t i, std::size_t h, AttentionResult& res) {
  const AttentionShape& sh = s_.sh;
  i_ = i;
  h_ = h;
  g_ = h / s_.group;
  Outputs out{res, (i * sh.n_heads + h) * sh.d_v};
  AttentionRowStats& st = res.rows[i * sh.n_heads + h];
  // Visible keys: a contiguous range [jl, jh).
  const std::int64_t pos = s_.pr.q_offset + static_cast<std::int64_t>(i);
  const std::int64_t nkv = static_cast<std::int64_t>(sh.n_kv);
  std::int64_t jl = 0, jh = nkv;
  if (s_.pr.causal) jh = std::min(jh, pos + 1);
  if (s_.pr.window > 0) {
    jl = std::max<std::int64_t>(jl, pos - s_.pr.window + 1);
    if (!s_.pr.causal) jh = std::min(jh, pos + s_.pr.window);
  }
  if (jh <= jl) {  // fully masked row: o = +0
    st = AttentionRowStats{-HUGE_VAL, 0.0, 0.0, 0, 0, false};
    for (std::size_t c = 0; c < sh.d_v; ++c) {
      res.out[out.base + c] = 0.0;
      res.approx[out.base + c] = 0.0;
      res.sum_p_abs_v[out.base + c] = 0.0;
      res.sum_p_abs_dev[out.base + c] = 0.0;
    }
    return;
  }
  jl_ = static_cast<std::size_t>(jl);
  nv_ = static_cast<std::size_t>(jh - jl);
  prec_used_ = 0;
  rational_used_ = false;
  scores();

  pending_.clear();
  bool first_done = false;
  if (s_.op.fast_paths) {
    for (std::size_t c = 0; c < sh.d_v; ++c) pending_.push_back(c);
    const std::vector<std::size_t> all = pending_;
    pending_.clear();
    // level0 pushes the columns it could not certify into pending_.
    if (level0(out)) first_done = true;
    else pending_ = all;
  } else {
    for (std::size_t c = 0; c < sh.d_v; ++c) pending_.push_back(c);
  }
  mpfr_prec_t P = std::min<mpfr_prec_t>(kFirstMpfrLevel, std::max<mpfr_prec_t>(s_.op.max_prec, 32));
  if (!first_done) {
    level_mpfr(P, true, out);
    P *= 2;
  }
  if (!pending_.empty()) rational(out);
  for (; !pending_.empty() && P <= s_.op.max_prec; P *= 2) level_mpfr(P, false, out);
  if (!pending_.empty()) {
    if (s_.op.throw_if_uncertified)
      throw std::runtime_error(std::string(kFn) + ": could not certify the rounding of out[" + std::to_string(i) +
                               ", " + std::to_string(h) + ", " + std::to_string(pending_.front()) +
                               "] within max_prec = " + std::to_string(s_.op.max_prec) + " bits");
    for (const std::size_t c : pending_) {
      res.out[out.base + c] = best_[c];
      res.certified[out.base + c] = 0;
    }
  }
  conditions(out);

  // Row statistics.
  st.n_visible = nv_;
  st.precision_bits = prec_used_;
  st.exact_rational = rational_used_;
  st.sum_exp = sum_exp_;
  if (s_.int_qk) {
    i128 mx = 0;
    for (std::size_t j = 0; j < nv_; ++j) mx = std::max(mx, Dabs_[j]);
    st.max_abs_qk = detail::i128_to_double(mx, s_.E, MPFR_RNDU);
  } else {
    st.max_abs_qk = *std::max_element(Dabs_d_.begin(), Dabs_d_.begin() + static_cast<std::ptrdiff_t>(nv_));
  }
  // max logit z_m (double approximation)
  begin_logits(128);
  if (s_.pr.softcap > 0) {
    st.max_score = mpfr_get_d(lm_.get(), MPFR_RNDN);
  } else {
    value(m_, Dj_.get());
    mpfr_set_prec(tmp_.get(), 128);
    mpfr_mul(tmp_.get(), Dj_.get(), tau_.get(), MPFR_RNDN);
    st.max_score = mpfr_get_d(tmp_.get(), MPFR_RNDN);
  }
}

}  // namespace

AttentionResult attention(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                          const AttentionShape& sh, const AttentionParams& pr, Format in,
                          const OracleOptions& op) {
  using detail::checked_mul;
  if (sh.d < 1) throw std::invalid_argument(std::string(kFn) + ": d must be >= 1");
  if (sh.d_v < 1) throw std::invalid_argument(std::string(kFn) + ": d_v must be >= 1");
  if (sh.n_heads < 1 || sh.n_kv_heads < 1)
    throw std::invalid_argument(std::string(kFn) + ": n_heads and n_kv_heads must be >= 1");
  if (sh.n_heads % sh.n_kv_heads != 0)
    throw std::invalid_argument(std::string(kFn) + ": n_heads = " + std::to_string(sh.n_heads) +
                                " is not divisible by n_kv_heads = " + std::to_string(sh.n_kv_heads));
  if (pr.q_offset < 0)
    throw std::invalid_argument(std::string(kFn) + ": q_offset = " + std::to_string(pr.q_offset) + " is negative");
  if (pr.window < 0)
    throw std::invalid_argument(std::string(kFn) + ": window = " + std::to_string(pr.window) + " is negative");
  if (pr.causal && static_cast<std::uint64_t>(pr.q_offset) + sh.n_q > sh.n_kv)
    throw std::invalid_argument(std::string(kFn) + ": causal query positions q_offset + n_q = " +
                                std::to_string(static_cast<std::uint64_t>(pr.q_offset) + sh.n_q) +
                                " exceed n_kv = " + std::to_string(sh.n_kv));
  if (!std::isfinite(pr.scale)) throw std::invalid_argument(std::string(kFn) + ": scale is not finite");
  if (!std::isfinite(pr.softcap) || pr.softcap < 0)
    throw std::invalid_argument(std::string(kFn) + ": softcap must be finite and >= 0 (0 = none)");
  detail::check_size(kFn, "q", q.size(), checked_mul(kFn, checked_mul(kFn, sh.n_q, sh.n_heads), sh.d), "n_q*n_heads*d");
  detail::check_size(kFn, "k", k.size(), checked_mul(kFn, checked_mul(kFn, sh.n_kv, sh.n_kv_heads), sh.d),
                     "n_kv*n_kv_heads*d");
  detail::check_size(kFn, "v", v.size(), checked_mul(kFn, checked_mul(kFn, sh.n_kv, sh.n_kv_heads), sh.d_v),
                     "n_kv*n_kv_heads*d_v");
  const detail::Range rq = detail::check_values(kFn, "q", q, in);
  const detail::Range rk = detail::check_values(kFn, "k", k, in);
  const detail::Range rv = detail::check_values(kFn, "v", v, in);

  Setup s;
  s.sh = sh;
  s.pr = pr;
  s.op = op;
  s.q = q;
  s.k = k;
  s.v = v;
  s.group = sh.n_heads / sh.n_kv_heads;
  s.sgn = pr.exact_inv_sqrt_d ? 1 : (pr.scale > 0) - (pr.scale < 0);
  s.sq = detail::fixed_scale(rq.lo);
  s.sk = detail::fixed_scale(rk.lo);
  if (op.fast_paths && detail::int_dot_fits(rq, rk, sh.d) && s.sq != 0 && s.sk != 0) {
    s.int_qk = true;
    s.qk64 = rq.span() + rk.span() + detail::ceil_log2(sh.d) <= 62;
    s.E = rq.lo + rk.lo;
  } else {
    s.dprec = detail::exact_sum_prec(rq, rk, sh.d) + 1;
  }
  s.rv = rv;
  s.sv = detail::fixed_scale(rv.lo);
  const int L = detail::ceil_log2(sh.n_kv + 1);
  const int F = std::min(62, 124 - rv.span() - L);
  if (op.fast_paths && rv.span() <= 62 && F >= 40 && s.sv != 0) {
    s.F = F;
    s.av64 = rv.span() + L <= 62;
  }

  AttentionResult res;
  const std::size_t n_out = sh.n_q * sh.n_heads * sh.d_v;
  res.out.assign(n_out, 0.0);
  res.approx.assign(n_out, 0.0);
  res.sum_p_abs_v.assign(n_out, 0.0);
  res.sum_p_abs_dev.assign(n_out, 0.0);
  res.certified.assign(n_out, 1);
  res.rows.assign(sh.n_q * sh.n_heads, AttentionRowStats{});
  if (n_out == 0) return res;
  RowEval ev(s);
  for (std::size_t i = 0; i < sh.n_q; ++i)
    for (std::size_t h = 0; h < sh.n_heads; ++h) ev.run(i, h, res);
  return res;
}

}  // namespace kvconf::ref
